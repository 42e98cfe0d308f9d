"""In-process fixtures for the concern unit tests (mitmproxy's tflow/taddons style)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mitmproxy import http
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons, tflow

from airlock.proxy.context import ProxyContext
from airlock.proxy.state import Tunnel
from tests.proxy.addons.ops_support import Harness, make_harness

REAL = "ghs_REALunit0123456789abcdefABCDEF0123"
PLACEHOLDER = "airlock-gh-unit-placeholder-0001"


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    """The one in-process context (ops_support.make_harness) inside mitmproxy's taddons."""
    h = make_harness(tmp_path, listen_port=8080)
    with taddons.context(Proxyserver()) as tctx:  # type: ignore[no-untyped-call]
        tctx.configure(tctx.master.addons.get("proxyserver"), stream_large_bodies="4m")
        yield h
    h.ctx.audit.close()


@pytest.fixture
def ctx(harness: Harness) -> ProxyContext:
    return harness.ctx


def intercepted_flow(
    ctx: ProxyContext, *, host: str = "api.github.com", swapped: bool = True
) -> http.HTTPFlow:
    """A flow inside an intercepted tunnel to ``host``; ``swapped`` puts REAL in its scrub map."""
    from airlock.proxy.scrubber import token_forms

    flow = tflow.tflow(resp=True)
    flow.client_conn.timestamp_tls_setup = 1.0
    flow.request.scheme = "https"
    flow.request.host = host
    flow.request.port = 443
    flow.request.headers["host"] = host
    state = ctx.connections.state(flow.client_conn.id)
    state.session_id = "s1"
    state.tunnel = Tunnel(session_id="s1", host=host, port=443, intercept=True)
    if swapped:
        state.scrub.update(token_forms(REAL, PLACEHOLDER, ["x-access-token"]))
    return flow
