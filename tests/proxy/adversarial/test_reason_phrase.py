"""The HTTP/1 reason phrase is scrubbed (issue 13, item 10)."""

from __future__ import annotations

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.reflector import Reflector
from tests.proxy.adversarial.conftest import Lease, h1_get, h2_get, nothing_written

pytestmark = pytest.mark.timeout(120)


def test_reason_phrase_is_scrubbed(lease: Lease, upstream: Reflector) -> None:
    resp = h1_get(lease, "/reason")
    assert upstream.last("/reason").auth == f"Bearer {lease.real}"
    assert resp.status == 200, resp.head
    assert lease.leaks(resp.everything) == []
    assert resp.body == b"ok"


def test_headers_names_and_values_are_scrubbed(lease: Lease, upstream: Reflector) -> None:
    for resp in (h1_get(lease, "/header"), h2_get(lease, "/header")):
        assert upstream.last("/header").auth == f"Bearer {lease.real}"
        assert resp.status == 200
        assert lease.leaks(resp.everything) == []
        assert f"Bearer {lease.placeholder}".encode() in resp.everything


def test_zz_nothing_written_contains_a_real_token(proxy: ProxyProcess) -> None:
    nothing_written(proxy)
