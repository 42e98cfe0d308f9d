"""ProxyClient and the ``airlock session|lease`` commands against a real proxy."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from airlock.client.proxy import ProxyClient, ProxyError
from tests.fakes.proxy_harness import ProxyProcess, running_proxy
from tests.fakes.wait import wait_until, yield_to_loop

pytestmark = pytest.mark.timeout(120)

REAL = "ghs_client_test_real_token_0123456789abcdef"


def rule(ph: str = "airlock-gh-client-test-1") -> dict[str, object]:
    return {
        "host": "api.github.com",
        "placeholder": ph,
        "schemes": ["token", "bearer"],
        "replace": {"scheme": "bearer", "token": REAL},
    }


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[ProxyProcess]:
    async with running_proxy(tmp_path) as p:
        yield p


async def test_lease_context_manager_removes_the_lease(proxy: ProxyProcess) -> None:
    async with proxy.client() as client:
        session = await client.create_session(allow=["api.github.com"], ttl_s=60)
        sid = session.session_id
        async with client.lease(sid, [rule()], ttl_s=60, lease_id="ok") as info:
            assert info.lease_id == "ok"
            assert [x.lease_id for x in await client.list_leases(sid)] == ["ok"]
        assert await client.list_leases(sid) == []

        with pytest.raises(RuntimeError):
            async with client.lease(sid, [rule()], ttl_s=60) as info:
                assert len(await client.list_leases(sid)) == 1
                raise RuntimeError("command failed")
        assert await client.list_leases(sid) == []


async def test_lease_is_removed_on_cancellation(proxy: ProxyProcess) -> None:
    async with proxy.client() as client:
        session = await client.create_session(allow=[], ttl_s=60)
        sid = session.session_id
        inside = asyncio.Event()

        async def command() -> None:
            async with client.lease(sid, [rule()], ttl_s=60):
                inside.set()
                await asyncio.Event().wait()  # until cancelled

        task = asyncio.create_task(command())
        await asyncio.wait_for(inside.wait(), 10)
        assert len(await client.list_leases(sid)) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await client.list_leases(sid) == []


async def test_lease_is_removed_when_cancelled_during_install(proxy: ProxyProcess) -> None:
    async with proxy.client() as client:
        session = await client.create_session(allow=[], ttl_s=60)
        sid = session.session_id

        async def command() -> None:
            async with client.lease(
                sid, [rule("airlock-gh-cancel-early")], ttl_s=60, lease_id="early"
            ):
                await asyncio.Event().wait()  # until cancelled

        task = asyncio.create_task(command())
        await yield_to_loop()  # the PUT is in flight
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        async def no_leases() -> bool:
            return await client.list_leases(sid) == []

        with contextlib.suppress(AssertionError):
            await wait_until(no_leases, timeout=5)
        assert await client.list_leases(sid) == []


async def test_errors_are_typed_and_never_carry_the_token(proxy: ProxyProcess) -> None:
    async with proxy.client() as client:
        with pytest.raises(ProxyError) as missing:
            await client.put_lease("no-such-session", "l", [rule()], ttl_s=10)
        assert (missing.value.status, missing.value.code) == (404, "session_not_found")
        assert REAL not in str(missing.value) and REAL not in repr(missing.value)
        bad = {**rule(), "placeholder": REAL + " with space"}
        with pytest.raises(ProxyError) as invalid:
            await client.put_lease("s", "l", [bad], ttl_s=10)
        assert invalid.value.code == "invalid_request"
        assert REAL not in str(invalid.value)


async def test_control_address_forms(proxy: ProxyProcess, tmp_path: Path) -> None:
    path = proxy.control.removeprefix("unix:")
    for control in (proxy.control, path):
        async with ProxyClient(control) as client:
            assert (await client.health()).status == "ok"
            assert "BEGIN CERTIFICATE" in await client.ca_pem()
    async with ProxyClient(str(tmp_path / "nothing.sock")) as client:
        with pytest.raises(ProxyError) as info:
            await client.health()
        assert info.value.status == 0


def _airlock(args: list[str], control: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "AIRLOCK_PROXY_CONTROL": control, **env}
    return subprocess.run(
        [sys.executable, "-m", "airlock.client.cli", *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_cli_session_and_lease_commands(proxy: ProxyProcess) -> None:
    control = proxy.control

    def flow() -> None:
        created = _airlock(
            ["session", "create", "--allow", "api.github.com", "--id", "cli-1"], control
        )
        assert created.returncode == 0, created.stderr
        info = json.loads(created.stdout)
        assert info["session_id"] == "cli-1"
        assert "HTTPS_PROXY=" in created.stderr

        put = _airlock(
            ["lease", "put", "cli-1", "gh", "--github", "--placeholder", "airlock-gh-cli-placeholder",
             "--token-env", "GH_REAL", "--ttl", "60"],
            control,
            GH_REAL=REAL,
        )  # fmt: skip
        assert put.returncode == 0, put.stderr
        assert json.loads(put.stdout)["hosts"] == ["api.github.com", "github.com"]
        assert REAL not in put.stdout + put.stderr

        listed = _airlock(["lease", "list", "cli-1"], control)
        assert listed.returncode == 0, listed.stderr
        assert [x["lease_id"] for x in json.loads(listed.stdout)] == ["gh"]
        assert REAL not in listed.stdout

        assert _airlock(["lease", "delete", "cli-1", "gh"], control).returncode == 0
        assert json.loads(_airlock(["lease", "list", "cli-1"], control).stdout) == []
        assert _airlock(["session", "delete", "cli-1"], control).returncode == 0
        missing = _airlock(["lease", "list", "cli-1"], control)
        assert missing.returncode == 1
        assert "session_not_found" in missing.stderr

    await asyncio.to_thread(flow)


async def test_cli_lease_allow_and_session_events(proxy: ProxyProcess) -> None:
    """``airlock lease put`` takes the allow fields; ``airlock session events`` prints them."""
    control = proxy.control

    def flow() -> None:
        assert _airlock(["session", "create", "--id", "cli-ev"], control).returncode == 0
        put = _airlock(
            ["lease", "put", "cli-ev", "gh", "--github", "--token-env", "GH_REAL",
             "--method", "GET", "--graphql", "query", "--git-repo", "acme/widgets",
             "--push-ref", "refs/heads/agent/*"],
            control,
            GH_REAL=REAL,
        )  # fmt: skip
        assert put.returncode == 0, put.stderr
        rules = json.loads(put.stdout)["rules"]
        api, git = sorted(rules, key=lambda r: r["host"])
        assert api["allow"] == {"methods": ["GET"], "graphql": {"operations": ["query"]}}
        assert git["allow"]["git"] == {
            "repos": ["acme/widgets"],
            "push_refs": ["refs/heads/agent/*"],
            "allow_delete": False,
        }
        placeholder = put.stderr.split("# placeholder: ", 1)[1].strip()
        assert placeholder.startswith("ghs_") and len(placeholder) == 40
        assert REAL not in put.stdout + put.stderr
        bad = _airlock(
            ["lease", "put", "cli-ev", "x", "--github", "--token-env", "GH_REAL",
             "--graphql", "subscription"],
            control,
            GH_REAL=REAL,
        )  # fmt: skip
        assert bad.returncode == 2 and REAL not in bad.stderr
        assert _airlock(["session", "delete", "cli-ev"], control).returncode == 0
        events = _airlock(["session", "events", "--all"], control)
        assert events.returncode == 0, events.stderr
        mine = [json.loads(line) for line in events.stdout.splitlines()]
        mine = [e for e in mine if e.get("session") == "cli-ev"]
        assert [e["type"] for e in mine] == ["lease_installed", "lease_removed", "session_closed"]
        assert REAL not in events.stdout and placeholder not in events.stdout

    await asyncio.to_thread(flow)
