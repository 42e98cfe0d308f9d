"""Client errors: one ClientError root, an unreachable daemon, a stopped daemon, timeouts."""

from __future__ import annotations

import inspect
import os
import signal
import socket
import tempfile
from pathlib import Path

import pytest

import airlock.client
from airlock.client import errors
from airlock.client.daemon import (
    AirlockError,
    CallTimeout,
    ClientError,
    DaemonClient,
    DaemonUnavailable,
    NotFound,
    call_timeout,
)
from airlock.client.proxy import ProxyClient, ProxyError, ProxyUnavailable
from airlock.daemon import errors as daemon_errors
from airlock.daemon.protocol import TOOLS_BY_NAME
from tests.fakes.daemon_harness import running_daemon
from tests.fakes.net import free_port


def test_every_exported_exception_is_a_client_error() -> None:
    exported = [getattr(airlock.client, name) for name in airlock.client.__all__]
    from airlock.client import daemon as daemon_module

    exported += [getattr(daemon_module, name) for name in daemon_module.__all__]
    exported += errors.all_tool_error_types()
    classes = [e for e in exported if inspect.isclass(e) and issubclass(e, BaseException)]
    assert len(classes) > 20
    for cls in classes:
        assert issubclass(cls, ClientError), cls
    assert issubclass(ProxyUnavailable, ProxyError)
    assert issubclass(CallTimeout, TimeoutError)


def test_tool_errors_keep_the_daemon_classes() -> None:
    err = errors.tool_error("not_found", "no such file", {"path": "x"})
    assert isinstance(err, NotFound) and isinstance(err, daemon_errors.NotFound)
    assert isinstance(err, daemon_errors.AirlockError) and isinstance(err, AirlockError)
    assert err.to_envelope()["error"]["code"] == "not_found"
    assert isinstance(errors.tool_error("no_such_code", "m"), errors.Internal)
    for daemon_type in daemon_errors.ERROR_TYPES.values():
        assert issubclass(errors.client_type(daemon_type), daemon_type)


def test_every_daemon_code_has_a_declared_client_class() -> None:
    """The client's classes are checked against the daemon's table, not copied blindly."""
    daemon_types = set(daemon_errors.ERROR_TYPES.values())
    declared = set(errors.declared_daemon_types())
    assert declared == daemon_types, (
        f"declare a class in client/errors.py for {sorted(t.__name__ for t in daemon_types - declared)}"
        f"; remove {sorted(t.__name__ for t in declared - daemon_types)}"
    )
    for daemon_type in daemon_types:
        cls = errors.client_type(daemon_type)
        assert cls.__name__ == daemon_type.__name__ and cls.__module__ == errors.__name__


def test_call_timeout_is_the_tools_own_plus_a_margin() -> None:
    exec_spec = TOOLS_BY_NAME["exec"]
    assert call_timeout(exec_spec, {"timeout_s": 600}, 30, None) == 630
    assert call_timeout(exec_spec, {}, 30, None) == 90
    assert call_timeout(TOOLS_BY_NAME["file_read"], {}, 30, None) == 90
    assert call_timeout(exec_spec, {"timeout_s": 600}, 30, 5) == 5


async def test_connection_refused_is_daemon_unavailable(tmp_path: Path) -> None:
    port = free_port()
    async with DaemonClient(url=f"http://127.0.0.1:{port}") as client:
        with pytest.raises(DaemonUnavailable) as info:
            await client.health()
    assert f"127.0.0.1:{port}" in str(info.value)
    missing = Path(tempfile.mkdtemp(prefix="al-e-")) / "none.sock"
    async with DaemonClient(socket=str(missing)) as client:
        with pytest.raises(DaemonUnavailable):
            await client.file_read(path="a.txt")


async def test_a_listener_that_never_answers_times_out() -> None:
    sock_dir = Path(tempfile.mkdtemp(prefix="al-e-"))
    path = sock_dir / "mute.sock"
    with socket.socket(socket.AF_UNIX) as mute:
        mute.bind(str(path))
        mute.listen(8)  # accepts connections (the kernel does) and never answers
        async with DaemonClient(socket=str(path), service_timeout_s=0.5) as client:
            with pytest.raises(CallTimeout):
                await client.health()


async def test_a_stopped_daemon_gives_call_timeout(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    async with (
        running_daemon(tmp_path) as daemon,
        DaemonClient(socket=str(daemon.socket), timeout_s=1.0) as client,
    ):
        assert (await client.health()).status == "ok"
        os.kill(daemon.process.pid, signal.SIGSTOP)
        try:
            with pytest.raises(CallTimeout):
                await client.health()
            with pytest.raises(CallTimeout):
                await client.file_read(path="a.txt")
        finally:
            os.kill(daemon.process.pid, signal.SIGCONT)
        assert (await client.file_read(path="a.txt")).kind == "text"


async def test_bad_keywords_are_a_client_error(tmp_path: Path) -> None:
    async with DaemonClient(socket=str(tmp_path / "unused.sock")) as client:
        with pytest.raises(errors.InvalidRequest):
            await client.file_read(path="a", offset=0)


async def test_unreachable_proxy_is_proxy_unavailable() -> None:
    port = free_port()
    async with ProxyClient(f"tcp://127.0.0.1:{port}") as proxy:
        with pytest.raises(ProxyUnavailable) as info:
            await proxy.health()
    assert info.value.status == 0 and isinstance(info.value, ClientError)


def test_read_only_has_a_named_client_class() -> None:
    """``read_only`` (403, second edition) maps to an exported class, like every other code."""
    from airlock.client.daemon import ReadOnly
    from airlock.client.errors import ClientError, tool_error
    from airlock.daemon import errors as daemon_errors

    err = tool_error("read_only", "src/a.py is read-only", {"path": "src/a.py"})
    assert type(err) is ReadOnly
    assert isinstance(err, daemon_errors.ReadOnly) and isinstance(err, ClientError)
