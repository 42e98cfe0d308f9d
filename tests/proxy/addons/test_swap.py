"""Swap's refusal outcomes, in process (reason codes and statuses as DESIGN names them).

``lease_scope`` and ``credential_unavailable`` are in test_swap_scope.py and
``host_mismatch`` in test_host_check.py; these are the rest: a placeholder used
where it may not be (another session, another host, plain http, another header
or scheme), a session that is gone, a store that cannot answer, and a
duplicated credential header (never swapped, audited as ``swap_skipped``).
"""

from __future__ import annotations

import asyncio

from mitmproxy import http

from airlock.proxy.addons.swap import Swap
from airlock.proxy.context import ProxyContext
from airlock.proxy.store.base import SessionRecord, hash_secret, now
from airlock.proxy.store.redis import RedisStore
from tests.fakes.net import free_port
from tests.proxy.addons.conftest import PLACEHOLDER, REAL, intercepted_flow
from tests.proxy.addons.ops_support import Harness
from tests.proxy.addons.test_swap_scope import error_code, flow_for, lease


def _refused(ctx: ProxyContext, flow: http.HTTPFlow, status: int, reason: str) -> None:
    asyncio.run(Swap(ctx).requestheaders(flow))
    assert flow.response is not None and flow.response.status_code == status
    assert error_code(flow) == reason
    assert flow.response.headers["x-airlock-refusal"] == reason
    assert REAL not in flow.request.headers.get("authorization", "")  # nothing swapped
    assert ctx.metrics.refusals.labels(reason=reason)._value.get() == 1


def test_another_sessions_placeholder_is_exfiltration(ctx: ProxyContext) -> None:
    lease(ctx, None)  # s1's placeholder
    asyncio.run(ctx.store.create_session(SessionRecord("s2", hash_secret("y"), (), now() + 600)))
    flow = flow_for(ctx, "GET", "/user")
    ctx.connections.state(flow.client_conn.id).session_id = "s2"
    _refused(ctx, flow, 403, "exfiltration_wrong_session")


def test_a_placeholder_for_another_host_is_exfiltration(ctx: ProxyContext) -> None:
    lease(ctx, None)  # leased for api.github.com only
    flow = intercepted_flow(ctx, host="uploads.github.com", swapped=False)
    flow.response = None
    flow.request.headers["authorization"] = f"Bearer {PLACEHOLDER}"
    _refused(ctx, flow, 403, "exfiltration_wrong_host")


def test_a_placeholder_over_plain_http_is_exfiltration(ctx: ProxyContext) -> None:
    lease(ctx, None)
    flow = flow_for(ctx, "GET", "/user")
    flow.request.scheme = "http"
    _refused(ctx, flow, 403, "exfiltration_insecure")


def test_a_placeholder_in_another_header_is_exfiltration(ctx: ProxyContext) -> None:
    lease(ctx, None)  # leased for ``authorization`` with the bearer scheme
    flow = flow_for(ctx, "GET", "/user")
    del flow.request.headers["authorization"]
    flow.request.headers["x-forward-to"] = f"Bearer {PLACEHOLDER}"
    _refused(ctx, flow, 403, "exfiltration_wrong_form")


def test_a_placeholder_with_another_scheme_is_exfiltration(ctx: ProxyContext) -> None:
    lease(ctx, None)
    flow = flow_for(ctx, "GET", "/user")
    flow.request.headers["authorization"] = f"token {PLACEHOLDER}"
    _refused(ctx, flow, 403, "exfiltration_wrong_form")


def test_a_session_that_is_gone_gets_407(ctx: ProxyContext) -> None:
    flow = flow_for(ctx, "GET", "/user")  # s1 was never created (or expired)
    _refused(ctx, flow, 407, "session_gone")


def test_a_store_that_cannot_answer_refuses_503(ctx: ProxyContext) -> None:
    """A real Redis client towards a port nobody listens on: the swap fails closed."""
    store = RedisStore(f"redis://127.0.0.1:{free_port()}")
    ctx.store = store
    try:
        flow = flow_for(ctx, "GET", "/user")
        _refused(ctx, flow, 503, "store_unavailable")
    finally:
        asyncio.run(store.close())


def test_a_duplicated_credential_header_is_never_swapped(harness: Harness) -> None:
    ctx = harness.ctx
    lease(ctx, None)
    flow = flow_for(ctx, "GET", "/user")
    flow.request.headers.add("authorization", f"Bearer {PLACEHOLDER}")
    asyncio.run(Swap(ctx).requestheaders(flow))
    assert flow.response is None  # not refused: forwarded with the placeholders
    assert flow.request.headers.get_all("authorization") == [f"Bearer {PLACEHOLDER}"] * 2
    assert REAL.encode() not in ctx.connections.state(flow.client_conn.id).scrub
    # One line per copy of the header: neither is swapped.
    assert [e["reason"] for e in harness.events("swap_skipped")] == ["duplicate_header"] * 2


def test_an_exfiltration_attempt_revokes_the_sessions_leases(ctx: ProxyContext) -> None:
    """DESIGN: an exfiltration attempt (not refuse_only) ends the session's leases."""
    lease(ctx, None)
    flow = intercepted_flow(ctx, host="uploads.github.com", swapped=False)
    flow.response = None
    flow.request.headers["authorization"] = f"Bearer {PLACEHOLDER}"
    _refused(ctx, flow, 403, "exfiltration_wrong_host")
    assert asyncio.run(ctx.store.list_leases("s1")) == []
