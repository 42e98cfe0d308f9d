"""103 Early Hints are passed on and the final response follows.

mitmproxy 11 treats an HTTP/1 ``103`` from upstream as the final response and
drops the real one. The reflector sends ``103`` (the swapped value in its Link
header) and then ``200`` whose body reflects the value again.
"""

from __future__ import annotations

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.reflector import Reflector
from tests.proxy.adversarial.conftest import TOKENS, Lease, h1_get, h2_get, leaks, written_leaks

pytestmark = pytest.mark.timeout(120)


def test_http1_early_hints_then_final_response(lease: Lease, upstream: Reflector) -> None:
    resp = h1_get(lease, "/early")
    assert upstream.last("/early").auth == f"Bearer {lease.real}"
    assert leaks(resp.everything, lease.real) == []
    assert resp.status == 200, resp.raw[:300]
    assert resp.body == f"final Bearer {lease.placeholder}".encode()
    assert [status for status, _ in resp.interim] == [103]
    assert b"rel=preload" in resp.interim[0][1]


def test_http2_early_hints_then_final_response(lease: Lease, upstream: Reflector) -> None:
    resp = h2_get(lease, "/early")
    assert upstream.last("/early").auth == f"Bearer {lease.real}"
    assert leaks(resp.everything, lease.real) == []
    assert resp.status == 200, resp.headers
    assert resp.body == f"final Bearer {lease.placeholder}".encode()


def test_zz_nothing_written_contains_a_real_token(proxy: ProxyProcess) -> None:
    assert TOKENS
    assert written_leaks(proxy, TOKENS) == []
