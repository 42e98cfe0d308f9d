"""The control API over its real transports: routes, shapes, auth, errors."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from airlock.client.proxy import ProxyClient, ProxyError
from tests.fakes.proxy_harness import ProxyProcess, running_proxy
from tests.proxy.helpers import api_rule, git_rule, placeholder, real_token

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def tcp_proxy(tmp_path: Path) -> AsyncIterator[ProxyProcess]:
    async with running_proxy(tmp_path, control_tcp=True) as proxy:
        yield proxy


@pytest.fixture
async def unix_proxy(tmp_path: Path) -> AsyncIterator[ProxyProcess]:
    async with running_proxy(tmp_path) as proxy:
        yield proxy


def _base(proxy: ProxyProcess) -> str:
    return "http://" + proxy.control.removeprefix("tcp://")


async def test_tcp_control_requires_the_bearer_token(tcp_proxy: ProxyProcess) -> None:
    base = _base(tcp_proxy)
    async with aiohttp.ClientSession() as http:
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "Basic x"}):
            # Health is open to probes; everything else needs the token.
            async with http.get(base + "/v1/health", headers=headers) as resp:
                assert resp.status == 200
            for route in ("/v1/ca.pem", "/metrics", "/v1/sessions/x/leases"):
                async with http.get(base + route, headers=headers) as resp:
                    assert resp.status == 401, route
                    assert (await resp.json())["error"]["code"] == "unauthorized"
            async with http.post(base + "/v1/sessions", json={}, headers=headers) as resp:
                assert resp.status == 401
        good = {"authorization": f"Bearer {tcp_proxy.control_token}"}
        async with http.get(base + "/v1/health", headers=good) as resp:
            assert resp.status == 200
            assert (await resp.json())["status"] == "ok"
    async with ProxyClient(tcp_proxy.control) as anonymous:
        with pytest.raises(ProxyError) as info:
            await anonymous.create_session(allow=[])
        assert info.value.status == 401


async def test_tcp_control_without_token_file_refuses_to_start(tmp_path: Path) -> None:
    import asyncio
    import subprocess

    from tests.fakes.proxy_harness import PROXY_BIN

    result = await asyncio.to_thread(
        subprocess.run,
        [str(PROXY_BIN), "--listen", "127.0.0.1:0", "--control", "tcp://127.0.0.1:1",
         "--state-dir", str(tmp_path / "s")],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert "control-token-file" in result.stderr


async def test_unix_socket_is_private(unix_proxy: ProxyProcess) -> None:
    path = Path(unix_proxy.control.removeprefix("unix:"))
    assert stat.S_ISSOCK(path.stat().st_mode)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_session_and_lease_lifecycle(unix_proxy: ProxyProcess) -> None:
    real = real_token()
    ph = placeholder()
    async with unix_proxy.client() as client:
        info = await client.create_session(allow=["api.github.com"], ttl_s=120, session_id="sbx-1")
        assert info.session_id == "sbx-1"
        assert info.proxy_url.startswith("http://sbx-1:")
        with pytest.raises(ProxyError) as dup:
            await client.create_session(allow=[], session_id="sbx-1")
        assert (dup.value.status, dup.value.code) == (409, "session_exists")

        lease = await client.put_lease(
            "sbx-1", "lease-a", [api_rule(ph, real), git_rule(ph, real)], ttl_s=60
        )
        assert lease.lease_id == "lease-a"
        assert lease.hosts == ["api.github.com", "github.com"]
        assert lease.expires_at <= info.expires_at
        leases = await client.list_leases("sbx-1")
        assert [x.lease_id for x in leases] == ["lease-a"]

        await client.delete_lease("sbx-1", "lease-a")
        await client.delete_lease("sbx-1", "lease-a")
        await client.delete_lease("sbx-1", "never-existed")
        assert await client.list_leases("sbx-1") == []

        await client.delete_session("sbx-1")
        await client.delete_session("sbx-1")
        with pytest.raises(ProxyError) as gone:
            await client.list_leases("sbx-1")
        assert (gone.value.status, gone.value.code) == (404, "session_not_found")
        with pytest.raises(ProxyError) as nolease:
            await client.put_lease("sbx-1", "x", [api_rule(ph, real)], ttl_s=5)
        assert nolease.value.status == 404

    audit = await unix_proxy.await_audit(
        lambda e: e["event"] == "session_deleted" and e.get("session") == "sbx-1",
        what="session_deleted for sbx-1",
    )
    events = [e["event"] for e in audit if e.get("session") == "sbx-1"]
    assert events == [
        "session_created",
        "lease_created",
        "lease_deleted",
        "session_deleted",
    ]


async def test_no_response_contains_a_token(unix_proxy: ProxyProcess) -> None:
    real = real_token()
    ph = placeholder()
    sock = unix_proxy.control.removeprefix("unix:")
    conn = aiohttp.UnixConnector(path=sock)
    async with aiohttp.ClientSession(connector=conn) as http:
        base = "http://proxy"
        async with http.post(base + "/v1/sessions", json={"allow": [], "ttl_s": 60}) as resp:
            sid = (await resp.json())["session_id"]
        bodies: list[str] = []
        rule = api_rule(ph, real)
        async with http.put(
            f"{base}/v1/sessions/{sid}/leases/l1", json={"ttl_s": 60, "rules": [rule]}
        ) as resp:
            assert resp.status == 200
            bodies.append(await resp.text())
        async with http.get(f"{base}/v1/sessions/{sid}/leases") as resp:
            bodies.append(await resp.text())
        async with http.get(f"{base}/v1/sessions/{sid}") as resp:
            bodies.append(await resp.text())
        # Malformed requests that carry the token must not echo it.
        bad_rules = [
            {**rule, "host": "not a host"},
            {**rule, "schemes": ["nope"]},
            {**rule, "replace": {"scheme": "digest", "token": real}},
            {**rule, "extra": real},
            {**rule, "placeholder": real + " x"},
        ]
        for bad in bad_rules:
            async with http.put(
                f"{base}/v1/sessions/{sid}/leases/l2", json={"ttl_s": 60, "rules": [bad]}
            ) as resp:
                assert resp.status == 400
                body = await resp.text()
                assert (await resp.json())["error"]["code"] == "invalid_request"
                bodies.append(body)
        async with http.put(f"{base}/v1/sessions/{sid}/leases/l3", data=f"{{{real}") as resp:
            assert resp.status == 400
            bodies.append(await resp.text())
        async with http.get(base + "/metrics") as resp:
            bodies.append(await resp.text())
    for body in bodies:
        assert real not in body
        assert ph not in body or "placeholder" in body


async def test_placeholder_cannot_be_claimed_by_another_session(unix_proxy: ProxyProcess) -> None:
    ph = placeholder()
    async with unix_proxy.client() as client:
        a = await client.create_session(allow=[], ttl_s=60)
        b = await client.create_session(allow=[], ttl_s=60)
        await client.put_lease(a.session_id, "l", [api_rule(ph, real_token())], ttl_s=60)
        with pytest.raises(ProxyError) as info:
            await client.put_lease(b.session_id, "l", [api_rule(ph, real_token())], ttl_s=60)
        assert (info.value.status, info.value.code) == (409, "placeholder_in_use")
        # Replacing one's own lease is fine.
        again = await client.put_lease(a.session_id, "l", [api_rule(ph, real_token())], ttl_s=30)
        assert again.lease_id == "l"


async def test_invalid_ids_and_bodies(unix_proxy: ProxyProcess) -> None:
    async with unix_proxy.client() as client:
        with pytest.raises(ProxyError) as bad_sid:
            await client.create_session(allow=[], session_id="has:colon")
        assert bad_sid.value.status == 400
        with pytest.raises(ProxyError) as bad_ttl:
            await client.create_session(allow=[], ttl_s=0)
        assert bad_ttl.value.status == 400
        with pytest.raises(ProxyError) as bad_allow:
            await client.create_session(allow=["evil.com/path"])
        assert bad_allow.value.status == 400


async def test_metrics_count_sessions_leases_and_refusals(unix_proxy: ProxyProcess) -> None:
    async with unix_proxy.client() as client:
        info = await client.create_session(allow=[], ttl_s=60)
        await client.put_lease(
            info.session_id, "l", [api_rule(placeholder(), real_token())], ttl_s=60
        )
    sock = unix_proxy.control.removeprefix("unix:")
    async with (
        aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=sock)) as http,
        http.get("http://proxy/metrics") as resp,
    ):
        text = await resp.text()
    assert "airlock_proxy_active_sessions 1.0" in text
    assert "airlock_proxy_active_leases 1.0" in text
    assert "airlock_proxy_control_request_seconds_bucket" in text
    assert "airlock_proxy_swaps_total" in text
    assert "airlock_proxy_refusals_total" in text


async def test_envelope_turns_any_escaped_exception_into_json(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The outermost middleware is the last word: nothing reaches aiohttp's text/plain 500."""
    from aiohttp import web

    from airlock.proxy.control import envelope

    async def boom(request: web.Request) -> web.StreamResponse:
        raise RuntimeError("secret-in-message")

    async def deep(request: web.Request) -> web.StreamResponse:
        raise RecursionError

    app = web.Application(middlewares=[envelope])
    app.router.add_get("/boom", boom)
    app.router.add_get("/deep", deep)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = str(tmp_path / "e.sock")
    await web.UnixSite(runner, sock).start()
    try:
        async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=sock)) as http:
            async with http.get("http://x/boom") as resp:
                assert resp.status == 500 and resp.content_type == "application/json"
                assert (await resp.json())["error"]["code"] == "internal"
            async with http.get("http://x/deep") as resp:
                assert resp.status == 400
                assert (await resp.json())["error"]["code"] == "invalid_request"
            async with http.get("http://x/missing") as resp:
                assert resp.status == 404
                assert (await resp.json())["error"]["code"] == "not_found"
    finally:
        await runner.cleanup()
    assert "secret-in-message" not in caplog.text
    assert "RuntimeError" in caplog.text
