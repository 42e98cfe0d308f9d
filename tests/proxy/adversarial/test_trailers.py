"""Trailers are scrubbed, streamed or buffered (issue 13, item 4).

The reflector sends the swapped value in a trailer after a small and after a
5 MiB body (streamed past the buffer limit), over HTTP/2 and chunked HTTP/1.1.
"""

from __future__ import annotations

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.reflector import Reflector
from tests.proxy.adversarial.conftest import BIG, H1_ONLY, Lease, h1_get, h2_get, nothing_written

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("size", [1000, BIG])
def test_http2_trailers_are_scrubbed(lease: Lease, upstream: Reflector, size: int) -> None:
    resp = h2_get(lease, f"/trailers?size={size}")
    assert upstream.last("/trailers").auth == f"Bearer {lease.real}"
    assert resp.status == 200 and resp.ended, resp.headers
    assert len(resp.body) == size
    assert lease.leaks(resp.everything) == []
    trailers = dict(resp.trailers)
    if trailers:  # passed on, as the placeholder
        assert trailers[b"x-reflect"] == f"Bearer {lease.placeholder}".encode()


@pytest.mark.parametrize("size", [1000, BIG])
def test_http1_trailers_are_dropped_and_the_response_completes(
    lease: Lease, upstream: Reflector, size: int
) -> None:
    """mitmproxy 11 cannot relay HTTP/1 trailers (its HTTP/1 layer would stop and
    leave the client waiting): they are dropped, the body completes, nothing leaks."""
    resp = h1_get(lease, f"/trailers?size={size}", headers={"TE": "trailers"})
    assert upstream.last("/trailers").auth == f"Bearer {lease.real}"
    assert resp.status == 200 and resp.complete, resp.head
    assert len(resp.body) == size
    assert lease.leaks(resp.everything) == []
    assert b"x-reflect" not in resp.trailers.lower()


@pytest.mark.parametrize("size", [1000, BIG])
def test_http1_upstream_trailers_to_http2_client(
    lease: Lease, upstream_h1: Reflector, size: int
) -> None:
    resp = h2_get(lease, f"/trailers?size={size}", host=H1_ONLY)
    assert upstream_h1.last("/trailers").auth == f"Bearer {lease.real}"
    assert resp.status == 200 and resp.ended, resp.headers
    assert len(resp.body) == size
    assert lease.leaks(resp.everything) == []


def test_zz_nothing_written_contains_a_real_token(proxy: ProxyProcess) -> None:
    nothing_written(proxy)
