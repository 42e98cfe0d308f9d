"""A request inside a tunnel must name the tunnel's host (issue 13, item 2).

Inside an intercepted ``api.github.com`` tunnel the sandbox sends another Host
(HTTP/1), ``:authority`` (HTTP/2) or absolute-form target, hoping the swapped
credential reaches a different virtual host behind the same address. The proxy
answers 403 ``host_mismatch`` itself: nothing is swapped, nothing reaches the
upstream, the refusal is audited.
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.reflector import Reflector
from tests.fakes.wait import wait_until_sync
from tests.proxy.adversarial.conftest import (
    H1Response,
    H2Response,
    Lease,
    h1_get,
    h2_get,
    nothing_written,
)

pytestmark = pytest.mark.timeout(120)


def marker() -> str:
    return f"/header?case={uuid.uuid4().hex}"


def never_reached(upstream: Reflector, path: str) -> bool:
    return not [r for r in upstream.requests if r.path == path]


def assert_mismatch_answered(resp: H1Response | H2Response, upstream: Reflector, path: str) -> None:
    """The proxy itself answered 403 ``host_mismatch``; nothing reached the upstream."""
    assert resp.status == 403, resp.everything[:500]
    assert json.loads(resp.body)["error"]["code"] == "host_mismatch"
    assert never_reached(upstream, path)


def assert_swapped(resp: H1Response | H2Response, upstream: Reflector, lease: Lease) -> None:
    """Answered 200: the upstream received the real token in place of the placeholder."""
    assert resp.status == 200, resp.everything[:500]
    assert upstream.last("/header").auth == f"Bearer {lease.real}"


def refused(proxy: ProxyProcess, sid: str) -> int:
    return sum(
        1
        for e in proxy.audit_events()
        if e["event"] == "refusal"
        and e.get("reason") == "host_mismatch"
        and e.get("session") == sid
    )


@pytest.mark.parametrize(
    "host_header",
    [
        "evil.test",
        "attacker-app.github.com",
        "github.com",
        "api.github.com:8443",
        "api.github.com@evil.test",
    ],
)
def test_http1_other_host_is_refused(
    lease: Lease, upstream: Reflector, proxy: ProxyProcess, host_header: str
) -> None:
    path = marker()
    proxy.flush_audit()
    before = refused(proxy, lease.session.session_id)
    resp = h1_get(lease, path, host_header=host_header)
    assert resp.status in (400, 403), resp.head
    if resp.status == 403:
        assert json.loads(resp.body)["error"]["code"] == "host_mismatch"
    assert never_reached(upstream, path)
    assert lease.leaks(resp.everything) == []
    if resp.status == 403:
        wait_until_sync(
            lambda: refused(proxy, lease.session.session_id) > before, message="no refusal line"
        )
        assert refused(proxy, lease.session.session_id) == before + 1


def test_http1_two_host_headers_are_refused(lease: Lease, upstream: Reflector) -> None:
    path = marker()
    resp = h1_get(lease, path, headers={"Host": "evil.test"})
    assert resp.status in (400, 403), resp.head
    assert never_reached(upstream, path)


def test_http1_absolute_form_target_naming_another_host_is_refused(
    lease: Lease, upstream: Reflector
) -> None:
    path = marker()
    resp = h1_get(lease, path, target=f"https://evil.test{path}")
    assert_mismatch_answered(resp, upstream, path)


@pytest.mark.parametrize("authority", ["evil.test", "github.com", "api.github.com:8443"])
def test_http2_other_authority_is_refused(
    lease: Lease, upstream: Reflector, authority: str
) -> None:
    path = marker()
    resp = h2_get(lease, path, authority=authority)
    assert_mismatch_answered(resp, upstream, path)
    assert lease.leaks(resp.everything) == []


def test_http2_host_header_beside_authority_must_match_too(
    lease: Lease, upstream: Reflector
) -> None:
    path = marker()
    resp = h2_get(lease, path, extra=[("host", "evil.test")])
    # mitmproxy's HTTP/2 layer already refuses this (stream reset); never a 200.
    assert resp.reset or resp.status in (400, 403), resp.headers
    assert never_reached(upstream, path)


@pytest.mark.parametrize(
    ("client", "host"),
    [
        ("h1", "api.github.com"),
        ("h1", "API.GitHub.com:443"),
        ("h1", "api.github.com."),
        ("h2", "api.github.com:443"),
    ],
)
def test_same_host_and_port_in_any_spelling_is_swapped(
    lease: Lease, upstream: Reflector, client: str, host: str
) -> None:
    """HTTP/1 ``Host`` normalised (case, default port, trailing dot); HTTP/2
    ``:authority`` with the port."""
    path = marker()
    if client == "h1":
        resp: H1Response | H2Response = h1_get(lease, path, host_header=host)
    else:
        resp = h2_get(lease, path, authority=host)
    assert_swapped(resp, upstream, lease)
    if isinstance(resp, H1Response):
        assert resp.header("x-reflect") == f"Bearer {lease.placeholder}"
    else:
        assert lease.leaks(resp.everything) == []


def test_zz_nothing_written_contains_a_real_token(proxy: ProxyProcess) -> None:
    nothing_written(proxy)
