"""Swap's tunnel host check, in process: Host / :authority / absolute-form."""

from __future__ import annotations

import asyncio
import json

import pytest
from mitmproxy import http
from mitmproxy.test import tutils

from airlock.proxy.addons.swap import Swap, host_mismatch
from airlock.proxy.context import ProxyContext
from airlock.proxy.state import Tunnel
from tests.proxy.addons.conftest import intercepted_flow

TUNNEL = Tunnel(session_id="s1", host="api.github.com", port=443, intercept=True)


def h1(host: str | list[str], authority: str = "") -> http.Request:
    req = tutils.treq(authority=authority.encode(), headers=http.Headers())
    for value in [host] if isinstance(host, str) else host:
        req.headers.add("host", value)
    return req


def h2(authority: str, host: str | None = None) -> http.Request:
    req = tutils.treq(
        http_version=b"HTTP/2.0", authority=authority.encode(), headers=http.Headers()
    )
    if host is not None:
        req.headers["host"] = host
    return req


@pytest.mark.parametrize(
    "request_",
    [
        h1("api.github.com"),
        h1("API.GitHub.COM:443"),
        h1("api.github.com."),
        h2("api.github.com"),
        h2("api.github.com:443", host="api.github.com"),
    ],
)
def test_same_host_passes(request_: http.Request) -> None:
    assert host_mismatch(request_, TUNNEL) is None


@pytest.mark.parametrize(
    "request_",
    [
        h1("evil.test"),
        h1("api.github.com:8443"),
        h1("github.com"),
        h1(["api.github.com", "evil.test"]),
        h1("api.github.com", authority="evil.test"),
        h1("api.github.com@evil.test"),
        h1([]),
        h2("evil.test"),
        h2("api.github.com", host="evil.test"),
    ],
)
def test_other_host_is_a_mismatch(request_: http.Request) -> None:
    assert host_mismatch(request_, TUNNEL) is not None


def test_swap_refuses_before_anything_is_swapped(ctx: ProxyContext) -> None:
    flow = intercepted_flow(ctx, swapped=False)
    flow.response = None
    flow.request.headers["host"] = "attacker-app.vercel.app"
    flow.request.headers["authorization"] = "token airlock-gh-whatever"
    asyncio.run(Swap(ctx).requestheaders(flow))
    assert flow.response is not None and flow.response.status_code == 403
    assert json.loads(flow.response.content or b"")["error"]["code"] == "host_mismatch"
    assert flow.request.headers["authorization"] == "token airlock-gh-whatever"


def test_connections_of_a_session_share_one_scrub_map(ctx: ProxyContext) -> None:
    """A token swapped on one connection is scrubbed on the session's others."""
    from airlock.proxy.addons.scrub import Scrub
    from airlock.proxy.store.base import SessionRecord, hash_secret, now
    from tests.proxy.addons.conftest import PLACEHOLDER, REAL

    asyncio.run(ctx.store.create_session(SessionRecord("s1", hash_secret("x"), (), now() + 600)))
    swap = Swap(ctx)
    first = intercepted_flow(ctx)  # has REAL in its (own) map already
    second = intercepted_flow(ctx, swapped=False)
    for flow in (first, second):
        flow.response = None
        asyncio.run(swap.requestheaders(flow))
    a = ctx.connections.get(first.client_conn.id)
    b = ctx.connections.get(second.client_conn.id)
    assert a is not None and b is not None and a.scrub is b.scrub
    assert REAL.encode() in b.scrub
    assert "airlock_refused" not in second.metadata
    second.response = http.Response.make(200, b"echo " + REAL.encode(), {})
    Scrub(ctx).response(second)
    assert second.response.content == b"echo " + PLACEHOLDER.encode()
