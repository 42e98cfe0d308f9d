"""Bodies of any framing and size are scrubbed (issue 13, item 1).

The reflector echoes the swapped Authorization value through the body: every
~1 KiB, at the middle and across every chunk boundary, with Content-Length,
chunked or close-delimited framing (HTTP/1.1) and over HTTP/2, plain or gzip,
below and past mitmproxy's 4 MiB buffer limit. The client decodes what it
receives as a real client would; no form of the real token may be in it.
"""

from __future__ import annotations

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.reflector import Reflector
from tests.proxy.adversarial.conftest import (
    BIG,
    H1_ONLY,
    H1Response,
    Lease,
    h1_get,
    h2_get,
    nothing_written,
)

pytestmark = pytest.mark.timeout(180)

CASES = [
    (size, framing, enc)
    for size in (300_000, BIG)
    for framing in ("cl", "chunked", "close")
    for enc in ("identity", "gzip")
]


# Every case over HTTP/1.1; over HTTP/2 (upstream) all but close-delimited framing.
CLIENT_CASES = [("h1", *c) for c in CASES] + [("h2", *c) for c in CASES if c[1] != "close"]


@pytest.mark.parametrize(("client", "size", "framing", "enc"), CLIENT_CASES)
def test_body_is_scrubbed(
    lease: Lease, upstream: Reflector, client: str, size: int, framing: str, enc: str
) -> None:
    chunk = 65536 if size > 1_000_000 else 4093
    path = f"/body?size={size}&framing={framing}&enc={enc}&chunk={chunk}"
    resp = h1_get(lease, path) if client == "h1" else h2_get(lease, path)
    assert upstream.last("/body").auth == f"Bearer {lease.real}"
    if isinstance(resp, H1Response):
        assert resp.status == 200 and resp.complete, resp.head
    else:
        assert resp.status == 200 and resp.ended, resp.headers
    assert len(resp.body) >= size * 0.9
    assert lease.leaks(resp.everything) == []
    # The reflected values arrive as the placeholder the sandbox sent.
    assert resp.body.count(f"Bearer {lease.placeholder}".encode()) >= size // 1100


@pytest.mark.parametrize(
    ("framing", "enc"), [("close", "identity"), ("close", "gzip"), ("chunked", "gzip")]
)
def test_http2_client_http1_upstream_body_is_scrubbed(
    lease: Lease, upstream_h1: Reflector, framing: str, enc: str
) -> None:
    """The proxy translates: HTTP/2 to the sandbox, HTTP/1.1 (close-delimited too) upstream."""
    path = f"/body?size={BIG}&framing={framing}&enc={enc}&chunk=65536"
    resp = h2_get(lease, path, host=H1_ONLY)
    assert upstream_h1.last("/body").auth == f"Bearer {lease.real}"
    assert resp.status == 200 and resp.ended, resp.headers
    assert lease.leaks(resp.everything) == []
    assert resp.body.count(f"Bearer {lease.placeholder}".encode()) >= BIG // 1100


@pytest.mark.parametrize(("framing", "enc"), [("chunked", "gzip"), ("close", "identity")])
def test_basic_form_is_scrubbed_too(
    basic_lease: Lease, upstream: Reflector, framing: str, enc: str
) -> None:
    """git's Basic credential, reflected as base64(x-access-token:<real>)."""
    path = f"/body?size={BIG}&framing={framing}&enc={enc}&chunk=65536"
    for resp in (
        h1_get(basic_lease, path, host="github.com"),
        h2_get(basic_lease, path.replace("close", "chunked"), host="github.com"),
    ):
        assert upstream.last("/body").auth == basic_lease.reflected
        assert basic_lease.leaks(resp.everything) == []
        assert resp.body.count(basic_lease.scrubbed.encode()) >= BIG // 1100


def test_body_corrupt_mid_stream_is_cut_off(lease: Lease, upstream: Reflector) -> None:
    """gzip that turns into clear bytes halfway: the body is cut off, never relayed raw."""
    resp = h1_get(lease, "/corrupt")
    assert upstream.last("/corrupt").auth == f"Bearer {lease.real}"
    assert lease.leaks(resp.everything) == []
    assert not resp.complete, resp.raw[-200:]
    audit = lease.proxy.wait_audit(
        lambda e: e["event"] == "refusal" and e.get("reason") == "unscrubbable_response",
        what="unscrubbable_response refusal",
    )
    assert "unscrubbable_response" in [e.get("reason") for e in audit if e["event"] == "refusal"]


def test_zz_nothing_written_contains_a_real_token(proxy: ProxyProcess) -> None:
    nothing_written(proxy)
