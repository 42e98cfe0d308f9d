"""Trailers are scrubbed, streamed or buffered (issue 13, item 4).

The reflector sends the swapped value in a trailer after a small and after a
5 MiB body (streamed past the buffer limit), over HTTP/2 and chunked HTTP/1.1.
"""

from __future__ import annotations

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.reflector import Reflector
from tests.proxy.adversarial.conftest import (
    BIG,
    TOKENS,
    Lease,
    h1_get,
    h2_get,
    leaks,
    written_leaks,
)

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("size", [1000, BIG])
def test_http2_trailers_are_scrubbed(lease: Lease, upstream: Reflector, size: int) -> None:
    resp = h2_get(lease, f"/trailers?size={size}")
    assert upstream.last("/trailers").auth == f"Bearer {lease.real}"
    assert resp.status == 200 and resp.ended, resp.headers
    assert len(resp.body) == size
    assert leaks(resp.everything, lease.real) == []
    trailers = dict(resp.trailers)
    if trailers:  # passed on, as the placeholder
        assert trailers[b"x-reflect"] == f"Bearer {lease.placeholder}".encode()


@pytest.mark.parametrize("size", [1000, BIG])
def test_http1_trailers_never_reach_the_client(
    lease: Lease, upstream: Reflector, size: int
) -> None:
    """mitmproxy 11 does not implement HTTP/1 trailers: such a response is cut
    off (never completed) rather than relayed; what did arrive is clean."""
    resp = h1_get(lease, f"/trailers?size={size}", headers={"TE": "trailers"}, timeout=5)
    assert upstream.last("/trailers").auth == f"Bearer {lease.real}"
    assert leaks(resp.everything, lease.real) == []
    assert lease.real.encode()[:8] not in resp.trailers


def test_zz_nothing_written_contains_a_real_token(proxy: ProxyProcess) -> None:
    assert TOKENS
    assert written_leaks(proxy, TOKENS) == []
