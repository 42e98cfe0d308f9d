"""Egress policy with a real proxy: default deny, refused address classes,
the control API unreachable, and passthrough for non-intercepted hosts."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from airlock.proxy.protocol import SessionInfo
from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.tls import TestCA
from tests.fakes.upstream import EchoUpstream
from tests.fakes.wait import wait_until
from tests.proxy.conftest import ProxyFactory
from tests.proxy.helpers import curl, curl_connect_status, run

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def proxy(
    start_proxy: ProxyFactory, other: EchoUpstream, untrusted: EchoUpstream
) -> Iterator[ProxyProcess]:
    with start_proxy(
        "egress",
        resolve=[
            f"vercel.com:443:127.0.0.1:{untrusted.port}",
            f"operator-allowed.test:443:127.0.0.1:{other.port}",
        ],
        control_tcp=True,
        allow=["operator-allowed.test"],
    ) as p:
        yield p


@pytest.fixture
async def session(proxy: ProxyProcess) -> AsyncIterator[SessionInfo]:
    async with proxy.client() as client:
        info = await client.create_session(allow=["*"], ttl_s=300)
        yield info
        await client.delete_session(info.session_id)


async def test_host_outside_allow_patterns_is_refused(proxy: ProxyProcess) -> None:
    async with proxy.client() as client:
        info = await client.create_session(allow=["api.github.com", "*.example.org"], ttl_s=60)
    env = proxy.client_env(info)
    assert await curl_connect_status(env, "https://github.com/") == 403
    assert await curl_connect_status(env, "https://example.org/") == 403  # *.x excludes apex
    assert await curl_connect_status(env, "https://api.github.com/") == 200

    def github_refused(e: dict[str, Any]) -> bool:
        return (
            e.get("session") == info.session_id
            and e.get("reason") == "host_not_allowed"
            and e.get("host") == "github.com"
        )

    audit = await proxy.await_audit(github_refused, what="host_not_allowed for github.com")
    events = [e for e in audit if e.get("session") == info.session_id]
    assert any(github_refused(e) for e in events)


@pytest.mark.parametrize(
    "target",
    [
        "https://127.0.0.1/",
        "https://10.0.0.1/",
        "https://169.254.169.254/",
        "http://169.254.169.254/latest/meta-data/",
        "https://localhost/",
        "https://[::1]/",
        "https://192.168.1.1:8443/",
    ],
)
async def test_internal_destinations_are_refused(
    proxy: ProxyProcess, session: SessionInfo, target: str
) -> None:
    env = proxy.client_env(session)
    if target.startswith("http://"):
        status, body, _ = await curl(env, target)
        assert status == 403
        assert "destination_refused" in body
    else:
        assert await curl_connect_status(env, target) == 403


async def test_control_api_is_unreachable_through_the_proxy(
    proxy: ProxyProcess, session: SessionInfo
) -> None:
    env = proxy.client_env(session)
    ctl = urlsplit(proxy.control)
    assert await curl_connect_status(env, f"https://{ctl.hostname}:{ctl.port}/v1/health") == 403
    status, _, _ = await curl(env, f"http://{ctl.hostname}:{ctl.port}/v1/health")
    assert status == 403
    # The proxy's own listener is not a destination either.
    assert await curl_connect_status(env, f"https://127.0.0.1:{proxy.port}/") == 403


async def test_operator_resolve_onto_control_api_is_refused(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Even an operator --resolve mapping cannot point a host at the control API."""
    tmp = tmp_path_factory.mktemp("ctl")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        ctl_port = s.getsockname()[1]
    proc = ProxyProcess(
        tmp,
        resolve=[f"ctl.test:443:127.0.0.1:{ctl_port}"],
        control_tcp=True,
        control_port=ctl_port,
    )
    await asyncio.to_thread(proc.start)
    try:
        assert proc.control == f"tcp://127.0.0.1:{ctl_port}"
        async with proc.client() as client:
            info = await client.create_session(allow=["ctl.test"], ttl_s=60)
        assert await curl_connect_status(proc.client_env(info), "https://ctl.test/v1/health") == 403
        audit = await proc.await_audit(
            lambda e: e.get("reason") == "control_api", what="control_api refusal"
        )
        assert any(e.get("reason") == "control_api" for e in audit)
    finally:
        await asyncio.to_thread(proc.stop)


async def test_non_intercepted_host_passes_through_with_its_own_certificate(
    proxy: ProxyProcess, session: SessionInfo, upstream_ca: TestCA, other: EchoUpstream
) -> None:
    env = proxy.client_env(session)
    env["CURL_CA_BUNDLE"] = str(upstream_ca.ca_path)  # trusts the origin's CA only
    status, _, err = await curl(
        env, "--cacert", str(upstream_ca.ca_path), "https://other.test/pass"
    )
    assert status == 200, err
    assert other.last().path == "/pass"
    # And a client trusting only the proxy CA rejects it: no MITM happened.
    env2 = proxy.client_env(session)
    result = await run(["curl", "-sS", "--cacert", str(proxy.ca_path), "https://other.test/"], env2)
    assert result.returncode == 60, result.stderr


async def test_intercepted_host_is_served_by_the_proxy_ca(
    proxy: ProxyProcess, session: SessionInfo, github: EchoUpstream
) -> None:
    def handshake() -> dict[str, object]:
        ctx = ssl.create_default_context(cafile=str(proxy.ca_path))
        secret = urlsplit(session.proxy_url).password
        raw = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        import base64

        creds = base64.b64encode(f"{session.session_id}:{secret}".encode()).decode()
        raw.sendall(
            f"CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n"
            f"Proxy-Authorization: Basic {creds}\r\n\r\n".encode()
        )
        assert raw.recv(4096).startswith(b"HTTP/1.1 200")
        with ctx.wrap_socket(raw, server_hostname="api.github.com") as tls:
            cert = tls.getpeercert()
            assert cert is not None
            return dict(cert)

    cert = await asyncio.to_thread(handshake)
    issuer = dict(x[0] for x in cert["issuer"])  # type: ignore[attr-defined]
    assert issuer["commonName"] == "airlock-proxy CA"


async def test_missing_or_bad_proxy_credentials_get_407(
    proxy: ProxyProcess, session: SessionInfo
) -> None:
    env = proxy.client_env(session)
    env["HTTPS_PROXY"] = env["https_proxy"] = f"http://127.0.0.1:{proxy.port}"
    assert await curl_connect_status(env, "https://api.github.com/") == 407
    env["HTTPS_PROXY"] = env["https_proxy"] = (
        f"http://{session.session_id}:wrong@127.0.0.1:{proxy.port}"
    )
    assert await curl_connect_status(env, "https://api.github.com/") == 407
    env["HTTPS_PROXY"] = env["https_proxy"] = f"http://nosuch:wrong@127.0.0.1:{proxy.port}"
    assert await curl_connect_status(env, "https://api.github.com/") == 407
    status, _, _ = await curl(
        {
            **env,
            "HTTP_PROXY": f"http://127.0.0.1:{proxy.port}",
            "http_proxy": f"http://127.0.0.1:{proxy.port}",
        },
        "http://plain.test/",
    )
    assert status == 407


async def test_deleted_or_expired_session_gets_407(proxy: ProxyProcess) -> None:
    async with proxy.client() as client:
        gone = await client.create_session(allow=["*"], ttl_s=60)
        await client.delete_session(gone.session_id)
        short = await client.create_session(allow=["*"], ttl_s=1)
    assert await curl_connect_status(proxy.client_env(gone), "https://api.github.com/") == 407

    async def short_expired() -> bool:
        status = await curl_connect_status(proxy.client_env(short), "https://api.github.com/")
        return status == 407

    await wait_until(short_expired, timeout=30, message="the 1 s session was still accepted")


async def test_operator_allow_applies_to_every_session(proxy: ProxyProcess) -> None:
    async with proxy.client() as client:
        info = await client.create_session(allow=[], ttl_s=60)
    # operator-allowed.test is allowed by --allow only; the session allows nothing.
    status = await curl_connect_status(proxy.client_env(info), "https://operator-allowed.test/")
    assert status == 200
    assert await curl_connect_status(proxy.client_env(info), "https://api.github.com/") == 403


async def test_upstream_certificate_is_always_verified(
    proxy: ProxyProcess, session: SessionInfo, untrusted: EchoUpstream
) -> None:
    untrusted.clear()
    status, body, _ = await curl(proxy.client_env(session), "https://vercel.com/")
    assert status == 502
    assert "certificate" in body.lower()
    assert untrusted.requests == []
