"""The proxy's own error pages never quote upstream bytes (issue 13, item 5).

The reflector answers with a response mitmproxy cannot parse, quoting the
swapped value in the status line, a header line or (HTTP/2) a header name.
mitmproxy's own error page would quote those bytes; airlock answers its JSON
error envelope instead.
"""

from __future__ import annotations

import json

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.reflector import Reflector
from tests.proxy.adversarial.conftest import H1_ONLY, Lease, h1_get, h2_get, nothing_written

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("route", ["/malformed", "/malformed-status"])
def test_http1_malformed_response_gets_airlock_error(
    lease: Lease, upstream: Reflector, route: str
) -> None:
    resp = h1_get(lease, route)
    assert upstream.last(route).auth == f"Bearer {lease.real}"
    assert resp.status == 502, resp.head
    assert lease.leaks(resp.everything) == []
    assert resp.header("content-type") == "application/json"
    error = json.loads(resp.body)["error"]
    assert error["code"] == "upstream_error" and "retry" in error["message"]
    assert b"mitmproxy" not in resp.everything


def test_http2_malformed_response_gets_airlock_error(lease: Lease, upstream: Reflector) -> None:
    resp = h2_get(lease, "/malformed")
    assert upstream.last("/malformed").auth == f"Bearer {lease.real}"
    assert lease.leaks(resp.everything) == []
    if not resp.reset:
        assert resp.status == 502, resp.headers
        assert json.loads(resp.body)["error"]["code"] == "upstream_error"


@pytest.mark.parametrize("route", ["/malformed", "/malformed-status"])
def test_http2_client_malformed_http1_upstream_gets_airlock_error(
    lease: Lease, upstream_h1: Reflector, route: str
) -> None:
    resp = h2_get(lease, route, host=H1_ONLY)
    assert upstream_h1.last(route).auth == f"Bearer {lease.real}"
    assert lease.leaks(resp.everything) == []
    assert resp.status == 502, resp.headers
    assert json.loads(resp.body)["error"]["code"] == "upstream_error"
    assert b"mitmproxy" not in resp.everything


def test_zz_nothing_written_contains_a_real_token(proxy: ProxyProcess) -> None:
    nothing_written(proxy)
