"""The last line and bounded memory (issue 22): each case a hostile upstream tried.

Against the real airlock-proxy and the reflector (HTTP/1.1 and HTTP/2
upstreams): the sandbox is answered in HTTP/1.1 whatever it offers; a 204/304
from an HTTP/2 upstream carries no bytes; a gzip *transfer* coding is decoded,
never relayed; base64 wrapped at 76, 64 or 60 columns is scrubbed; compression
bombs are cut with ``decoded_too_large`` while the proxy's memory stays
bounded; and a sandbox that never reads a 512 MiB download holds the upstream
back instead of making the proxy buffer it. Everything the client received,
and every file the proxy wrote, is grepped for every form of the token.
"""

from __future__ import annotations

import base64
import contextlib
import re
import socket
import ssl
import time
from pathlib import Path

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.reflector import Reflector, bomb
from tests.fakes.wait import wait_until_sync
from tests.proxy.adversarial.conftest import (
    BIG,
    H1_ONLY,
    Lease,
    h1_get,
    h2_get,
    nothing_written,
    open_tunnel,
    wait_refusal,
)

pytestmark = pytest.mark.timeout(240)

MIB = 1 << 20
# What one tunnel may add to the proxy's peak RSS under a bomb or a stalled
# download: the decode budget per upstream read (4 MiB + 100 x 64 KiB) and
# its copies on the way to TLS, the socket buffers, allocator slack. The
# unguarded proxy added hundreds of MiB to gigabytes in each case.
RSS_BOUND = 96 * MIB


def rss(pid: int, field: str = "VmRSS") -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+) kB", status, re.M)
    assert match is not None, status
    return int(match.group(1)) * 1024


def reset_peak(pid: int) -> None:
    """Start the peak RSS (VmHWM) over from the current RSS."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def proxy_pid(proxy: ProxyProcess) -> int:
    assert proxy.process is not None
    return proxy.process.pid


def unwrap(body: bytes) -> bytes:
    return body.replace(b"\r", b"").replace(b"\n", b"")


# --- ALPN ---------------------------------------------------------------------------


@pytest.mark.parametrize("offer", [("h2", "http/1.1"), ("h2",), ("http/1.1", "h2")])
def test_alpn_offering_h2_gets_http11_and_the_upstream_still_speaks_h2(
    lease: Lease, upstream: Reflector, offer: tuple[str, ...]
) -> None:
    sock = open_tunnel(lease, alpn=offer)
    with sock:
        assert sock.selected_alpn_protocol() in ("http/1.1", None)
        sock.sendall(
            b"GET /header HTTP/1.1\r\nHost: api.github.com\r\nConnection: close\r\n"
            b"Authorization: " + lease.authorization.encode() + b"\r\n\r\n"
        )
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    assert raw.startswith(b"HTTP/1.1 200"), raw[:200]
    assert upstream.last("/header").auth == f"Bearer {lease.real}"
    assert upstream.last("/header").http2 == ("h2" in offer)
    assert lease.leaks(raw) == []
    assert f"Bearer {lease.placeholder}".encode() in raw


# --- no-body statuses, transfer codings, wrapped base64 -----------------------------


@pytest.mark.parametrize("status", [204, 304])
@pytest.mark.parametrize("size", [1000, BIG])
def test_http2_no_body_status_carries_no_bytes(
    lease: Lease, upstream: Reflector, status: int, size: int
) -> None:
    """An HTTP/2 upstream sends DATA frames (the token) after a 204/304."""
    resp = h2_get(lease, f"/nobody?status={status}&size={size}")
    assert (
        upstream.last("/nobody").http2 and upstream.last("/nobody").auth == f"Bearer {lease.real}"
    )
    assert resp.status == status
    assert resp.raw.endswith(b"\r\n\r\n") and resp.body == b"", resp.raw[-200:]
    assert lease.leaks(resp.everything) == []


@pytest.mark.parametrize("te", ["gzip, chunked", "gzip"])
def test_gzip_transfer_coding_is_decoded_and_scrubbed(
    lease: Lease, upstream_h1: Reflector, te: str
) -> None:
    resp = h1_get(lease, "/te?te=" + te.replace(" ", "%20"), host=H1_ONLY)
    assert upstream_h1.last("/te").auth == f"Bearer {lease.real}"
    assert resp.status == 200 and resp.complete, resp.head
    assert resp.header("transfer-encoding") == "chunked"
    assert resp.body == b"te " + f"Bearer {lease.placeholder}".encode() * 50
    assert lease.leaks(resp.everything) == []


@pytest.mark.parametrize("cols", [76, 64, 60])
@pytest.mark.parametrize("nl", ["crlf", "lf"])
@pytest.mark.parametrize("via", ["h1", "h2"])
def test_wrapped_base64_is_scrubbed(
    lease: Lease, upstream: Reflector, cols: int, nl: str, via: str
) -> None:
    get = h1_get if via == "h1" else h2_get
    resp = get(lease, f"/wrapped?cols={cols}&nl={nl}")
    assert upstream.last("/wrapped").auth == f"Bearer {lease.real}"
    assert resp.status == 200, resp.raw[:300]
    flat = unwrap(resp.body)
    decoded = base64.b64decode(flat)
    assert lease.real.encode() not in decoded
    # Each copy was replaced (a base64 core at an odd alignment may blur the
    # byte next to it, as unwrapped base64 always did).
    assert decoded.count(lease.placeholder[2:-3].encode()) == 6
    assert lease.leaks(resp.everything + flat) == []
    # still wrapped where it was
    lines = resp.body.split(b"\r\n" if nl == "crlf" else b"\n")
    assert max(len(x) for x in lines) <= cols + 16  # the placeholder is longer


# --- compression bombs -----------------------------------------------------------


@pytest.fixture(scope="module")
def bombs() -> None:
    """Compress the bombs before any clock runs (they are cached)."""
    for enc in ("gzip", "br", "zstd"):
        bomb(enc, 512)


@pytest.mark.parametrize("enc", ["gzip", "br", "zstd"])
@pytest.mark.parametrize("via", ["h1", "h2"])
def test_compression_bomb_is_cut_and_memory_stays_bounded(
    lease: Lease, upstream: Reflector, bombs: None, enc: str, via: str
) -> None:
    pid = proxy_pid(lease.proxy)
    before = rss(pid)
    reset_peak(pid)
    get = h1_get if via == "h1" else h2_get
    resp = get(lease, f"/bomb?enc={enc}&mib=512")
    peak = rss(pid, "VmHWM") - before
    assert upstream.last("/bomb").auth == f"Bearer {lease.real}"
    assert len(resp.body) < 64 * MIB, len(resp.body)  # cut, not relayed
    assert peak < RSS_BOUND, f"peak RSS grew by {peak // MIB} MiB"
    wait_refusal(lease.proxy, "decoded_too_large")
    assert lease.leaks(resp.everything) == []


# --- a sandbox that never reads -----------------------------------------------------


@pytest.mark.parametrize("host", ["api.github.com", H1_ONLY])
def test_sandbox_that_never_reads_holds_the_upstream_back(
    lease: Lease, upstream: Reflector, upstream_h1: Reflector, host: str
) -> None:
    """512 MiB towards a sandbox that reads the head and stops: the proxy
    stops reading from the upstream instead of buffering (HTTP/2 upstream
    and HTTP/1.1 upstream)."""
    server = upstream if host == "api.github.com" else upstream_h1
    server.sent.pop("/huge", None)
    pid = proxy_pid(lease.proxy)
    before = rss(pid)
    reset_peak(pid)
    size = 512 * MIB
    sock = open_tunnel(lease, host, alpn=("h2", "http/1.1"))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(
            f"GET /huge?size={size} HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: {lease.authorization}\r\n\r\n".encode()
        )
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        # Wait until the upstream stops making progress (or, unbounded, finishes).
        last = [-1, time.monotonic()]

        def stalled() -> bool:
            now = server.sent.get("/huge", 0)
            if now != last[0]:
                last[:] = [now, time.monotonic()]
                return now >= size
            return time.monotonic() - last[1] > 1.5

        wait_until_sync(stalled, timeout=120, interval=0.1)
        sent = server.sent.get("/huge", 0)
        grown = rss(pid, "VmHWM") - before
    finally:
        with_closed(sock)
    assert sent < size // 4, f"the upstream pushed {sent // MIB} MiB into a stalled tunnel"
    assert grown < RSS_BOUND, f"peak RSS grew by {grown // MIB} MiB"


def with_closed(sock: ssl.SSLSocket) -> None:
    with contextlib.suppress(OSError):
        sock.close()


def test_zz_nothing_written_contains_a_real_token(proxy: ProxyProcess) -> None:
    nothing_written(proxy)
