"""Accountability: "which hosts did session X reach, and how much?" ("also
seen": allowed traffic was never audited; every 407 wrote a line).

Through a real proxy: ``tunnel_open``/``tunnel_close`` with byte counts for an
intercepted and a passthrough tunnel, ``request`` lines (method, path without
query, status, body bytes) inside the intercepted one, and a flood of
unauthenticated requests that writes a bounded number of lines plus one
``refusals_suppressed`` count.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.tls import TestCA
from tests.fakes.upstream import EchoUpstream
from tests.fakes.wait import wait_until_sync
from tests.proxy.adversarial.ops_fixtures import (
    CLOSE,
    OpsProxy,
    Seen,
    Tunnel,
    leased_session,
    raw_exchange,
    request_head,
    status_of,
)

pytestmark = pytest.mark.timeout(180)

SEEN = Seen()
SAMPLE = 5


@pytest.fixture(scope="module")
def proxy(ops_proxy: OpsProxy) -> Iterator[ProxyProcess]:
    with ops_proxy("audit", extra_args=["--refusal-audit-per-minute", str(SAMPLE)]) as p:
        yield p


def _events(proxy: ProxyProcess, event: str, **match: Any) -> list[dict[str, Any]]:
    return [
        e
        for e in proxy.audit_events()
        if e["event"] == event and all(e.get(k) == v for k, v in match.items())
    ]


async def test_intercepted_tunnel_and_its_requests_are_audited(
    proxy: ProxyProcess, ops_github: EchoUpstream
) -> None:
    info, ph, _ = await leased_session(proxy, SEEN)
    sid = info.session_id
    tunnel = Tunnel(proxy, info, "api.github.com", proxy.ca_path, SEEN)
    tunnel.open()
    status, small = tunnel.get(
        "/repos/x?access_token=secret-query", {"authorization": f"token {ph}"}
    )
    assert status == 200
    status, big = tunnel.get("/blob?big=300000", {"authorization": f"token {ph}"})
    assert status == 200 and len(big) > 250000  # scrubbed: placeholders are shorter
    tunnel.close()

    wait_until_sync(
        lambda: bool(_events(proxy, "tunnel_close", session=sid)),
        message="timed out waiting for tunnel_close",
    )
    opened = _events(proxy, "tunnel_open", session=sid)
    assert opened == [{**opened[0], "host": "api.github.com", "port": 443, "intercept": True}]
    requests = _events(proxy, "request", session=sid)
    assert [(r["method"], r["path"], r["status"]) for r in requests] == [
        ("GET", "/repos/x", 200),
        ("GET", "/blob", 200),
    ]
    assert requests[0]["bytes_down"] == len(small)
    assert requests[1]["bytes_down"] == len(big)
    assert all(r["host"] == "api.github.com" and r["bytes_up"] == 0 for r in requests)
    (closed,) = _events(proxy, "tunnel_close", session=sid)
    # Bytes on the client socket: TLS records, so at least the bodies.
    assert closed["bytes_down"] > len(small) + len(big)
    assert closed["bytes_up"] > 0
    assert "secret-query" not in proxy.audit_log.read_text()


async def test_passthrough_tunnel_is_audited_with_bytes(
    proxy: ProxyProcess, ops_ca: TestCA
) -> None:
    async with proxy.client() as client:
        info = await client.create_session(allow=["other.test"], ttl_s=60)
    sid = info.session_id
    tunnel = Tunnel(proxy, info, "other.test", ops_ca.ca_path, SEEN)
    tunnel.open()
    status, body = tunnel.get("/x")
    assert status == 200
    tunnel.close()
    wait_until_sync(
        lambda: bool(_events(proxy, "tunnel_close", session=sid)),
        message="timed out waiting for tunnel_close",
    )
    assert _events(proxy, "tunnel_open", session=sid, host="other.test", intercept=False)
    (closed,) = _events(proxy, "tunnel_close", session=sid)
    assert closed["host"] == "other.test" and closed["bytes_down"] > len(body)
    assert closed["bytes_up"] > 0
    assert _events(proxy, "request", session=sid) == []  # opaque: no per-request lines


def test_unauthenticated_flood_writes_bounded_audit(proxy: ProxyProcess) -> None:
    for _ in range(40):
        response = raw_exchange(
            proxy,
            request_head("CONNECT", "api.github.com:443", "api.github.com:443", CLOSE),
            SEEN,
        )
        assert status_of(response) == 407
    proxy.wait_audit(
        lambda e: e["event"] == "refusal" and e.get("reason") == "proxy_auth_required",
        count=SAMPLE,
        what="the sampled refusal lines",
    )
    written = _events(proxy, "refusal", reason="proxy_auth_required")
    assert len(written) == SAMPLE


def test_zz_suppressed_refusals_are_counted_and_no_token_leaked(proxy: ProxyProcess) -> None:
    proxy.stop()  # flushes the per-minute counts
    suppressed = _events(proxy, "refusals_suppressed", reason="proxy_auth_required")
    assert sum(e["count"] for e in suppressed) == 40 - SAMPLE
    assert SEEN.tokens
    SEEN.assert_clean(proxy.written_files())
