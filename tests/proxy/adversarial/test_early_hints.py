"""103 Early Hints are passed on and the final response follows.

mitmproxy 11 treats an HTTP/1 ``103`` from upstream as the final response and
drops the real one. The reflector sends ``103`` (the swapped value in its Link
header) and then ``200`` whose body reflects the value again.
"""

from __future__ import annotations

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.reflector import Reflector
from tests.proxy.adversarial.conftest import H1_ONLY, Lease, h1_get, h2_get, nothing_written

pytestmark = pytest.mark.timeout(120)


def test_http1_early_hints_then_final_response(lease: Lease, upstream: Reflector) -> None:
    resp = h1_get(lease, "/early")
    assert upstream.last("/early").auth == f"Bearer {lease.real}"
    assert lease.leaks(resp.everything) == []
    assert resp.status == 200, resp.raw[:300]
    assert resp.body == f"final Bearer {lease.placeholder}".encode()
    assert [status for status, _ in resp.interim] == [103]
    assert b"rel=preload" in resp.interim[0][1]


def test_http2_early_hints_then_final_response(lease: Lease, upstream: Reflector) -> None:
    resp = h2_get(lease, "/early")
    assert upstream.last("/early").auth == f"Bearer {lease.real}"
    assert upstream.last("/early").http2
    assert lease.leaks(resp.everything) == []
    assert resp.status == 200, resp.headers
    assert resp.body == f"final Bearer {lease.placeholder}".encode()
    assert [dict(h).get(b":status") for h in resp.informational] == [b"103"]
    assert f"Bearer {lease.placeholder}".encode() in dict(resp.informational[0])[b"link"]


def test_http1_upstream_early_hints_reach_an_http2_client(
    lease: Lease, upstream_h1: Reflector
) -> None:
    """An HTTP/2 client, an HTTP/1.1 upstream (the proxy translates)."""
    resp = h2_get(lease, "/early", host=H1_ONLY)
    assert upstream_h1.last("/early").auth == f"Bearer {lease.real}"
    assert not upstream_h1.last("/early").http2
    assert lease.leaks(resp.everything) == []
    assert resp.status == 200, resp.headers
    assert resp.body == f"final Bearer {lease.placeholder}".encode()
    assert [dict(h).get(b":status") for h in resp.informational] == [b"103"]
    assert f"Bearer {lease.placeholder}".encode() in dict(resp.informational[0])[b"link"]


def test_zz_nothing_written_contains_a_real_token(proxy: ProxyProcess) -> None:
    nothing_written(proxy)
