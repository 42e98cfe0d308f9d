"""Connections without credentials cannot take the proxy from a session (issue 22).

- a 407 is answered and the connection closed at once (the client reads the
  answer, then EOF), for CONNECT and plain http, missing or bad credentials;
- 300 connections refused with 407 do not lock another session out of a proxy
  limited to 256 descriptors (``RLIMIT_NOFILE`` set on the real process): they
  used to idle for the 300 s idle timeout, counted against no session;
- unauthenticated connections have a pool of their own: past its cap the
  oldest is closed to make room (so silent connections cannot lock a session
  out), and one that has not proven a session within the unauthenticated
  timeout is closed.
"""

from __future__ import annotations

import asyncio
import base64
import resource
import socket
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from airlock.proxy.protocol import SessionInfo
from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.wait import wait_until_sync
from tests.proxy.adversarial.ops_fixtures import OpsProxy, proxy_auth, send_connect

pytestmark = pytest.mark.timeout(120)

NO_CREDS = b"CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n"
BAD = base64.b64encode(b"nobody:wrong").decode()
BAD_CREDS = (
    b"CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n"
    b"Proxy-Authorization: Basic " + BAD.encode() + b"\r\n\r\n"
)
PLAIN_NO_CREDS = b"GET http://plain.test/ HTTP/1.1\r\nHost: plain.test\r\n\r\n"


def _proxy(ops_proxy: OpsProxy, *extra: str) -> AbstractContextManager[ProxyProcess]:
    return ops_proxy("unauth", extra_args=["--head-timeout", "60", "--idle-timeout", "120", *extra])


@pytest.fixture(scope="module")
def proxy(ops_proxy: OpsProxy) -> Iterator[ProxyProcess]:
    """A roomy unauthenticated pool: only the 407 answer itself can close those."""
    pool = ["--max-unauthenticated-connections", "1000", "--unauthenticated-timeout", "60"]
    with _proxy(ops_proxy, *pool) as p:
        yield p


@pytest.fixture(scope="module")
def small_pool(ops_proxy: OpsProxy) -> Iterator[ProxyProcess]:
    pool = ["--max-unauthenticated-connections", "8", "--unauthenticated-timeout", "2"]
    with _proxy(ops_proxy, *pool) as p:
        yield p


def _session(proxy: ProxyProcess) -> SessionInfo:
    async def make() -> SessionInfo:
        async with proxy.client() as client:
            return await client.create_session(allow=["other.test"], ttl_s=300)

    return asyncio.run(make())


def _read_until_eof(sock: socket.socket, timeout: float) -> tuple[bytes, bool]:
    """Everything the proxy sends, and whether it closed within ``timeout``."""
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return data, False
    except ConnectionResetError:
        return data, True
    return data, True


def _connect_answer(proxy: ProxyProcess, session: SessionInfo, timeout: float = 5) -> bytes:
    with socket.create_connection((proxy.proxy_host, proxy.port), timeout=timeout) as s:
        return send_connect(s, proxy_auth(session).encode())


@pytest.mark.parametrize("request_bytes", [NO_CREDS, BAD_CREDS, PLAIN_NO_CREDS])
def test_407_is_answered_then_the_connection_is_closed(
    proxy: ProxyProcess, request_bytes: bytes
) -> None:
    with socket.create_connection((proxy.proxy_host, proxy.port), timeout=10) as s:
        s.sendall(request_bytes)
        # The idle timeout is 120 s and the unauthenticated one 60 s: only the
        # 407 itself can close this connection within ten seconds.
        data, closed = _read_until_eof(s, timeout=10)
    assert data.startswith(b"HTTP/1.1 407"), data[:200]
    assert b"proxy-authenticate" in data.lower()
    assert closed, "the 407 connection was left open"


def test_many_407s_do_not_lock_out_another_session_under_a_low_fd_limit(
    proxy: ProxyProcess,
) -> None:
    assert proxy.process is not None
    pid = proxy.process.pid
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (256, 256))
    victim = _session(proxy)
    assert _connect_answer(proxy, victim).split(b" ")[1] == b"200"
    hostile: list[socket.socket] = []
    try:
        # 300 clients that never close their side (more than the proxy's fds).
        for _ in range(300):
            s = socket.create_connection((proxy.proxy_host, proxy.port), timeout=10)
            s.sendall(BAD_CREDS)
            hostile.append(s)

        def served() -> bool:
            try:
                return _connect_answer(proxy, victim, timeout=3).split(b" ")[1:2] == [b"200"]
            except OSError:
                return False

        wait_until_sync(served, timeout=20, message="the session is served despite 300 407s")
        open_fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
        assert open_fds < 200, open_fds
    finally:
        for s in hostile:
            s.close()
    assert proxy.process.poll() is None


def test_silent_connections_cannot_fill_the_unauthenticated_pool(
    small_pool: ProxyProcess,
) -> None:
    proxy = small_pool
    session = _session(proxy)
    silent = [
        socket.create_connection((proxy.proxy_host, proxy.port), timeout=10) for _ in range(8)
    ]
    try:
        # The pool is full of connections that say nothing; a client with
        # credentials is still served, and the oldest silent one makes room.
        assert _connect_answer(proxy, session).split(b" ")[1] == b"200"
        _, closed = _read_until_eof(silent[0], timeout=5)
        assert closed, "the oldest unauthenticated connection was not closed"
    finally:
        for s in silent:
            s.close()


def test_unauthenticated_connection_is_closed_after_its_timeout(
    small_pool: ProxyProcess,
) -> None:
    started = time.monotonic()
    with socket.create_connection((small_pool.proxy_host, small_pool.port), timeout=30) as s:
        # A head that never ends: the head timeout is 60 s, the unauthenticated one 2 s.
        s.sendall(b"CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\nX-Slow: ")
        _, closed = _read_until_eof(s, timeout=30)
    assert closed and time.monotonic() - started < 30
    small_pool.wait_audit(
        lambda e: e["event"] == "refusal" and e.get("reason") == "unauthenticated_timeout",
        what="the unauthenticated_timeout refusal line",
    )
