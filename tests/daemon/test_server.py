"""The socket service: auth scopes, routes, envelopes, socket lifecycle, concurrency."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from airlock.client.daemon import DaemonClient
from airlock.daemon.errors import AirlockError
from tests.daemon.test_contract import TOOL_NAMES
from tests.fakes.daemon_harness import running_daemon
from tests.fakes.procs import processes_with
from tests.fakes.wait import wait_until

WRITE_TOKEN = "w-" + "1" * 40
READ_TOKEN = "r-" + "2" * 40


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    f = tmp_path / "tokens"
    f.write_text(f"# orchestrator\n{WRITE_TOKEN} write\n{READ_TOKEN} read  # reviewer agent\n")
    return f


async def raw(
    socket_path: Path, method: str, route: str, **kw: object
) -> tuple[int, dict[str, Any]]:
    conn = aiohttp.UnixConnector(path=str(socket_path))
    async with (
        aiohttp.ClientSession(connector=conn) as http,
        http.request(method, f"http://d{route}", **kw) as resp,  # type: ignore[arg-type]
    ):
        return resp.status, json.loads(await resp.read())


async def test_auth_scopes(workspace_dir: Path, token_file: Path) -> None:
    (workspace_dir / "a.txt").write_text("a\n")
    async with running_daemon(workspace_dir, extra_args=["--token-file", str(token_file)]) as d:
        status, body = await raw(d.socket, "GET", "/v1/health")
        assert status == 200 and body["status"] == "ok"
        assert body["engines"]["search"]["engine"] in ("rg", "grep")
        assert body["engines"]["diagnostics"]["syntax"] == "tree-sitter"
        status, body = await raw(d.socket, "POST", "/v1/tools/file_read", json={"path": "a.txt"})
        assert status == 401 and body["error"]["code"] == "unauthorized"
        status, body = await raw(
            d.socket, "GET", "/v1/tools", headers={"Authorization": "Bearer nope"}
        )
        assert status == 401 and "not valid" in body["error"]["message"]
        async with d.client(READ_TOKEN) as reader:
            assert (await reader.file_read(path="a.txt")).kind == "text"
            for name, args in (
                ("file_write", {"path": "a.txt", "content": "pwned"}),
                ("exec", {"argv": ["touch", "pwned"]}),
            ):
                with pytest.raises(AirlockError) as info:
                    await reader.call(name, args)
                assert info.value.code == "forbidden"
            with pytest.raises(AirlockError) as info:
                await reader.call("file_read", {"path": "/etc/hostname", "granted_paths": ["/etc"]})
            assert info.value.code == "forbidden"
        assert (workspace_dir / "a.txt").read_text() == "a\n"
        assert not (workspace_dir / "pwned").exists()
        async with d.client(WRITE_TOKEN) as writer:
            await writer.file_write(path="a.txt", content="b\n")
        assert (workspace_dir / "a.txt").read_text() == "b\n"


async def test_token_file_reloaded_on_sighup(workspace_dir: Path, token_file: Path) -> None:
    async with running_daemon(workspace_dir, extra_args=["--token-file", str(token_file)]) as d:
        new = "n-" + "3" * 40
        token_file.write_text(f"{new} read\n")
        d.process.send_signal(signal.SIGHUP)

        async def new_token_works() -> bool:
            async with d.client(new) as c:
                try:
                    await c.tools()
                except AirlockError:
                    return False
            return True

        await wait_until(new_token_works, message="SIGHUP did not reload the token file")
        async with d.client(WRITE_TOKEN) as c:
            with pytest.raises(AirlockError) as info:
                await c.tools()
            assert info.value.code == "unauthorized"


async def test_routes_and_envelopes(workspace_dir: Path) -> None:
    async with running_daemon(workspace_dir) as d:
        status, body = await raw(d.socket, "GET", "/v1/tools")
        names = [t["name"] for t in body["tools"]]
        assert set(names) == TOOL_NAMES
        for tool in body["tools"]:
            assert tool["input_schema"]["type"] == "object"
            assert "anyOf" not in tool["input_schema"] and "oneOf" not in tool["input_schema"]
        by_name = {t["name"]: t for t in body["tools"]}
        assert (
            by_name["diagnostics"]["read_only"] and not by_name["diagnostics"]["supports_parallel"]
        )
        assert by_name["file_read"]["supports_parallel"] and not by_name["exec"]["read_only"]
        status, spec = await raw(d.socket, "GET", "/v1/openapi.json")
        assert spec["openapi"].startswith("3.1") and "/v1/tools/apply_patch" in spec["paths"]
        status, body = await raw(d.socket, "POST", "/v1/tools/nope", json={})
        assert status == 404 and body["error"]["code"] == "unknown_tool"
        status, body = await raw(d.socket, "POST", "/v1/tools/file_read", data=b"{not json")
        assert status == 400 and body["error"]["code"] == "invalid_request"
        status, body = await raw(d.socket, "POST", "/v1/tools/file_read", json=[1, 2])
        assert status == 400 and body["error"]["code"] == "invalid_request"
        status, body = await raw(
            d.socket, "POST", "/v1/tools/file_write",
            json={"path": "big", "content": "x" * (9 * 1024 * 1024)},
        )  # fmt: skip
        assert status == 413 and body["error"]["code"] == "too_large"
        assert "Traceback" not in json.dumps(body)
        conn = aiohttp.UnixConnector(path=str(d.socket))
        async with aiohttp.ClientSession(connector=conn) as http, http.get("http://d/metrics") as r:
            text = await r.text()
        assert 'airlockd_tool_calls_total{tool="file_read",outcome="invalid_request"}' in text


async def test_socket_mode_stale_live_and_sigterm(workspace_dir: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="al-s-"))
    sock_path = base / "d.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(sock_path))
    stale.close()  # a socket file nobody listens on
    async with running_daemon(workspace_dir, base_dir=base) as d:
        assert stat.S_IMODE(os.stat(d.socket).st_mode) == 0o660
        second = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "airlock.daemon.cli", "--workspace", str(workspace_dir),
            "--socket", str(d.socket), stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await second.communicate()
        assert second.returncode == 1 and b"running process" in err
        # SIGTERM drains an in-flight request before exiting, then removes the socket.
        async with d.client() as c:
            slow = asyncio.create_task(c.exec(argv=["sleep", "1.0314"]))
            await wait_until(lambda: processes_with("1.0314"), message="the exec never started")
            d.process.send_signal(signal.SIGTERM)
            result = await slow
            assert result.exit_code == 0
        await asyncio.wait_for(d.process.wait(), 15)
        assert d.process.returncode == 0
        assert not d.socket.exists()


async def test_health_answers_during_long_exec(workspace_dir: Path) -> None:
    async with running_daemon(workspace_dir) as d, d.client() as c:
        long = asyncio.create_task(c.exec(argv=["sleep", "5.0314"]))
        await wait_until(lambda: processes_with("5.0314"), message="the exec never started")
        started = time.monotonic()
        async with DaemonClient(socket=str(d.socket)) as other:
            health = await other.health()
        elapsed = time.monotonic() - started
        assert health.status == "ok"
        assert elapsed < 1.0, f"health took {elapsed:.2f}s while exec ran"
        assert not long.done()
        long.cancel()


async def test_fifty_concurrent_patches_on_one_file(workspace_dir: Path) -> None:
    target = workspace_dir / "many.txt"
    target.write_text("".join(f"line {i}\n" for i in range(50)))
    async with running_daemon(workspace_dir) as d:
        clients = [d.client() for _ in range(50)]
        try:
            await asyncio.gather(
                *(
                    c.file_patch(
                        path="many.txt", old_string=f"line {i}\n", new_string=f"LINE {i}\n"
                    )
                    for i, c in enumerate(clients)
                )
            )
        finally:
            await asyncio.gather(*(c.aclose() for c in clients))
    assert target.read_text() == "".join(f"LINE {i}\n" for i in range(50))


async def test_tcp_listener_requires_token(workspace_dir: Path, token_file: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with running_daemon(
        workspace_dir,
        extra_args=["--token-file", str(token_file), "--listen", f"tcp://127.0.0.1:{port}"],
    ):
        async with DaemonClient(url=f"http://127.0.0.1:{port}") as anon:
            with pytest.raises(AirlockError) as info:
                await anon.tools()
            assert info.value.code == "unauthorized"
        async with DaemonClient(url=f"http://127.0.0.1:{port}", token=WRITE_TOKEN) as c:
            assert len(await c.tools()) == 17
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.daemon.cli", "--workspace", str(workspace_dir),
        "--socket", "/tmp/al-never.sock", "--listen", "tcp://127.0.0.1:1",
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    assert proc.returncode == 2 and b"--token-file" in err
