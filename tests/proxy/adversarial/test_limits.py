"""Attack: exhaust the proxy with huge or slow request heads, many connections,
many requests (issue item 7).

- a request head over 64 KiB is answered 431 and closed (before and inside a
  tunnel), and the proxy's memory does not stay up after a flood of them;
- a half-sent head is closed after the head timeout (not the 600 s mitmproxy
  idles for);
- a session past its connection cap or its request rate gets 429 (the rate
  one with ``Retry-After``).
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.tls import TestCA
from tests.fakes.upstream import EchoUpstream
from tests.fakes.wait import wait_until_sync
from tests.proxy.adversarial.ops_fixtures import (
    OpsProxy,
    Seen,
    Tunnel,
    leased_session,
    proxy_auth,
    raw_exchange,
    rss_kib,
    send_connect,
    status_of,
)

pytestmark = pytest.mark.timeout(240)

SEEN = Seen()


@pytest.fixture(scope="module")
def proxy(ops_proxy: OpsProxy) -> Iterator[ProxyProcess]:
    with ops_proxy(
        "limits",
        extra_args=[
            "--head-timeout",
            "2",
            "--idle-timeout",
            "120",
            "--max-connections-per-session",
            "3",
        ],
    ) as p:
        yield p


@pytest.fixture(scope="module")
def slow_rate_proxy(ops_proxy: OpsProxy) -> Iterator[ProxyProcess]:
    with ops_proxy("rate", extra_args=["--session-rate", "0.2", "--session-burst", "2"]) as p:
        yield p


@pytest.fixture(scope="module")
def idle_proxy(ops_proxy: OpsProxy) -> Iterator[ProxyProcess]:
    with ops_proxy("idle", extra_args=["--idle-timeout", "2", "--head-timeout", "60"]) as p:
        yield p


def _huge_head(size: int) -> bytes:
    head = b"CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n"
    filler = b"X-Filler: " + b"a" * 1000 + b"\r\n"
    return head + filler * (size // len(filler) + 1)


def test_head_over_64k_is_431_and_closed(proxy: ProxyProcess) -> None:
    response = raw_exchange(proxy, _huge_head(70 * 1024), SEEN)
    assert status_of(response) == 431
    assert b'"header_too_large"' in response


async def test_head_over_64k_inside_an_intercepted_tunnel_is_431(proxy: ProxyProcess) -> None:
    async with proxy.client() as client:
        info = await client.create_session(allow=["api.github.com"], ttl_s=60)
    tunnel = Tunnel(proxy, info, "api.github.com", proxy.ca_path, SEEN)
    tunnel.open()
    status, body = tunnel.get("/", {f"x-big-{i}": "b" * 1000 for i in range(80)})
    assert status == 431
    assert b"header_too_large" in body
    wait_until_sync(
        tunnel.is_closed_by_peer, message="timed out waiting for connection closed after 431"
    )
    tunnel.close()


def test_flood_of_huge_heads_does_not_keep_memory(proxy: ProxyProcess) -> None:
    assert proxy.process is not None
    pid = proxy.process.pid
    raw_exchange(proxy, b"GET http://plain.test/ HTTP/1.1\r\nHost: plain.test\r\n\r\n", SEEN)
    before = rss_kib(pid)
    blob = b"X-Flood: " + b"f" * 65000 + b"\r\n"

    def flood() -> None:
        # 8 MiB of header bytes per connection, 16 connections (128 MiB in all):
        # without the limit mitmproxy buffers every byte of it.
        with socket.create_connection((proxy.proxy_host, proxy.port), timeout=20) as s:
            try:
                s.sendall(b"CONNECT other.test:443 HTTP/1.1\r\n")
                for _ in range(128):
                    s.sendall(blob)
            except OSError:
                return  # closed on us: what should happen

    threads = [threading.Thread(target=flood) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    after = rss_kib(pid)
    assert after - before < 48 * 1024, (before, after)
    assert proxy.process.poll() is None


def test_half_sent_head_is_closed_after_the_head_timeout(proxy: ProxyProcess) -> None:
    s = socket.create_connection((proxy.proxy_host, proxy.port), timeout=60)
    s.sendall(b"CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\nX-Slow: ")
    # Idle timeout is 120 s; only the 2 s head timeout can close it this soon.
    s.settimeout(60)
    data = s.recv(65536)
    s.close()
    assert data == b"" or b"HTTP/1.1 408" in data
    events = proxy.wait_audit(lambda e: e.get("reason") == "head_timeout", what="head_timeout")
    assert any(e.get("reason") == "head_timeout" for e in events)


async def test_half_sent_head_inside_an_intercepted_tunnel_is_closed(proxy: ProxyProcess) -> None:
    async with proxy.client() as client:
        info = await client.create_session(allow=["api.github.com"], ttl_s=60)
    tunnel = Tunnel(proxy, info, "api.github.com", proxy.ca_path, SEEN)
    tunnel.open()
    assert tunnel.conn.sock is not None
    tunnel.conn.sock.sendall(b"GET / HTTP/1.1\r\nHost: api.github.com\r\nX-Slow: ")
    wait_until_sync(
        tunnel.is_closed_by_peer,
        timeout=50,
        message="timed out waiting for slow head in a tunnel closed",
    )
    tunnel.close()


def test_silent_connection_is_closed_after_the_head_timeout(proxy: ProxyProcess) -> None:
    s = socket.create_connection((proxy.proxy_host, proxy.port), timeout=60)
    assert s.recv(1) == b""
    s.close()


async def test_connection_cap_per_session(proxy: ProxyProcess, ops_ca: TestCA) -> None:
    async with proxy.client() as client:
        info = await client.create_session(allow=["other.test"], ttl_s=60)
    tunnels = [Tunnel(proxy, info, "other.test", ops_ca.ca_path, SEEN) for _ in range(3)]
    for t in tunnels:
        t.open()
    fourth = Tunnel(proxy, info, "other.test", ops_ca.ca_path, SEEN)
    with pytest.raises(OSError, match="429"):
        fourth.open()
    tunnels[0].close()

    def fifth_opens() -> bool:
        t = Tunnel(proxy, info, "other.test", ops_ca.ca_path, SEEN)
        try:
            t.open()
        except OSError:
            return False
        tunnels.append(t)
        return True

    wait_until_sync(fifth_opens, message="timed out waiting for a slot freed by closing a tunnel")
    for t in tunnels:
        t.close()
    audit = proxy.wait_audit(lambda e: e.get("reason") == "connection_limit", what="limit line")
    assert any(e.get("reason") == "connection_limit" for e in audit)


async def test_request_rate_per_session_is_429_with_retry_after(
    slow_rate_proxy: ProxyProcess,
) -> None:
    proxy = slow_rate_proxy
    async with proxy.client() as client:
        info = await client.create_session(allow=["other.test"], ttl_s=60)
    auth = proxy_auth(info).encode()
    answers = [_connect_answer(proxy, auth) for _ in range(6)]
    statuses = [status_of(a) for a in answers]
    assert statuses.count(200) <= 4 and statuses.count(429) >= 2, statuses
    limited = [a for a in answers if status_of(a) == 429]
    for a in limited:
        head = a.split(b"\r\n\r\n", 1)[0].lower()
        retry = [line for line in head.split(b"\r\n") if line.startswith(b"retry-after:")]
        assert retry and int(retry[0].split(b":")[1]) >= 1
        assert b'"rate_limited"' in a


def _connect_answer(proxy: ProxyProcess, auth: bytes) -> bytes:
    """The proxy's answer to one CONNECT (the tunnel is then dropped)."""
    with socket.create_connection((proxy.proxy_host, proxy.port), timeout=20) as s:
        data = send_connect(s, auth)
        if status_of(data) != 200:
            # read the body too (JSON error)
            s.settimeout(5)
            try:
                while chunk := s.recv(65536):
                    data += chunk
                    if data.rstrip().endswith(b"}"):
                        break
            except (OSError, ssl.SSLError):
                pass
    return SEEN.add(data)


async def test_swaps_still_work_under_the_limits(
    proxy: ProxyProcess, ops_github: EchoUpstream
) -> None:
    info, ph, token = await leased_session(proxy, SEEN)
    tunnel = Tunnel(proxy, info, "api.github.com", proxy.ca_path, SEEN)
    tunnel.open()
    for _ in range(3):
        status, body = tunnel.get("/ok", {"authorization": f"token {ph}"})
        assert status == 200 and ph.encode() in body
    tunnel.close()
    assert ops_github.last().one("authorization") == f"Bearer {token}"


async def test_idle_tunnel_is_closed_after_the_idle_timeout(
    idle_proxy: ProxyProcess, ops_ca: TestCA
) -> None:
    async with idle_proxy.client() as client:
        info = await client.create_session(allow=["other.test"], ttl_s=120)
    tunnel = Tunnel(idle_proxy, info, "other.test", ops_ca.ca_path, SEEN)
    tunnel.open()
    assert tunnel.get("/x")[0] == 200
    # Head timeout is 60 s and the session lives on: only idleness closes it.
    wait_until_sync(
        tunnel.is_closed_by_peer, timeout=50, message="timed out waiting for idle tunnel closed"
    )
    tunnel.close()
    audit = idle_proxy.wait_audit(lambda e: e["event"] == "tunnel_close", what="tunnel_close")
    closes = [e for e in audit if e["event"] == "tunnel_close"]
    assert closes and closes[0]["session"] == info.session_id


def test_zz_no_real_token_anywhere(proxy: ProxyProcess, slow_rate_proxy: ProxyProcess) -> None:
    assert SEEN.tokens
    SEEN.assert_clean([*proxy.written_files(), *slow_rate_proxy.written_files()])
