"""The compiled matcher (proxy/form_scan.py) on a real airlock-proxy.

A token set is compiled on a worker thread while the Python path answers, so
the other adversarial tests may run on either path. Here the test waits until
``/metrics`` says the lease's forms are compiled, then makes the reflector
send the token in every framing, gzipped, past mitmproxy's buffer limit and
wrapped as base64, over HTTP/1.1 and HTTP/2 upstreams: the sandbox receives
the placeholder only, nothing the proxy wrote holds the token, and the guard
never has to step in.
"""

from __future__ import annotations

import base64
import re
import socket
from collections.abc import Callable
from typing import Any

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.reflector import Reflector
from tests.fakes.wait import wait_until_sync
from tests.proxy.adversarial.conftest import (
    BIG,
    Lease,
    h1_get,
    h2_get,
    written_leaks,
)

pytestmark = pytest.mark.timeout(180)

GETS: dict[str, Callable[..., Any]] = {"h1": h1_get, "h2": h2_get}


def form_sets(proxy: ProxyProcess, state: str) -> int:
    """``airlock_proxy_token_form_sets{state=...}`` from the proxy's ``/metrics``."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(proxy.control.removeprefix("unix:"))
        sock.sendall(b"GET /metrics HTTP/1.0\r\nHost: proxy\r\n\r\n")
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    pattern = rb'^airlock_proxy_token_form_sets\{state="%s"\} (\S+)$' % state.encode()
    match = re.search(pattern, raw, re.M)
    assert match, raw[-2000:]
    return int(float(match.group(1)))


@pytest.fixture(scope="module")
def compiled(proxy: ProxyProcess, lease: Lease) -> None:
    assert form_sets(proxy, "compiled") == 0
    h1_get(lease, "/header")  # scrubbing the answer asks for the lease's forms
    wait_until_sync(lambda: form_sets(proxy, "compiled") >= 1)
    assert form_sets(proxy, "failed") == 0


def get_scrubbed(lease: Lease, upstream: Reflector, via: str, path: str) -> Any:
    """GET ``path`` through the lease: the upstream saw the real token, the sandbox none."""
    resp = GETS[via](lease, path)
    assert upstream.last(path.split("?")[0]).auth == f"Bearer {lease.real}"
    assert resp.status == 200
    assert lease.leaks(resp.everything) == []
    return resp


# HTTP/2 has no close-delimited bodies: that framing is the HTTP/1.1 upstream's alone.
BODIES = [
    (via, framing, enc)
    for via in ("h1", "h2")
    for framing, enc in [("cl", "identity"), ("chunked", "identity"), ("chunked", "gzip")]
] + [("h1", "close", "identity")]


@pytest.mark.usefixtures("compiled")
@pytest.mark.parametrize(("via", "framing", "enc"), BODIES)
def test_streamed_bodies_reach_the_sandbox_scrubbed(
    lease: Lease, upstream: Reflector, via: str, framing: str, enc: str
) -> None:
    path = f"/body?size={BIG}&framing={framing}&enc={enc}&chunk=65536"
    resp = get_scrubbed(lease, upstream, via, path)
    assert resp.body.count(f"Bearer {lease.placeholder}".encode()) >= BIG // 1100


@pytest.mark.usefixtures("compiled")
@pytest.mark.parametrize("via", ["h1", "h2"])
@pytest.mark.parametrize(("cols", "nl"), [(76, "crlf"), (64, "lf"), (16, "lf")])
def test_wrapped_base64_reaches_the_sandbox_scrubbed(
    lease: Lease, upstream: Reflector, via: str, cols: int, nl: str
) -> None:
    resp = get_scrubbed(lease, upstream, via, f"/wrapped?cols={cols}&nl={nl}")
    decoded = base64.b64decode(resp.body.replace(b"\r", b"").replace(b"\n", b""))
    assert lease.real.encode() not in decoded
    assert decoded.count(lease.placeholder[2:-3].encode()) == 6  # each copy replaced


@pytest.mark.usefixtures("compiled")
def test_nothing_the_proxy_wrote_holds_the_token_and_the_guard_never_fired(
    proxy: ProxyProcess, lease: Lease
) -> None:
    assert written_leaks(proxy, [lease.real]) == []
    events = [e["event"] for e in proxy.audit_events()]
    assert "swap" in events  # the log is read (a swap per request above)
    assert "guard" not in events
