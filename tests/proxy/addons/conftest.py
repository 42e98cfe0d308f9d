"""In-process fixtures for the concern unit tests (mitmproxy's tflow/taddons style)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mitmproxy import http
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons, tflow

from airlock.proxy.audit import AuditLog
from airlock.proxy.config import ControlEndpoint, ProxyConfig
from airlock.proxy.context import ProxyContext
from airlock.proxy.state import Tunnel
from airlock.proxy.store.memory import MemoryStore

REAL = "ghs_REALunit0123456789abcdefABCDEF0123"
PLACEHOLDER = "airlock-gh-unit-placeholder-0001"


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[ProxyContext]:
    config = ProxyConfig(
        listen_host="127.0.0.1",
        listen_port=8080,
        control=ControlEndpoint(kind="unix", path=tmp_path / "c.sock"),
        state_dir=tmp_path,
    )
    store = MemoryStore()
    audit = AuditLog(tmp_path / "audit.log")
    context = ProxyContext.create(config, store, audit)
    with taddons.context(Proxyserver()) as tctx:  # type: ignore[no-untyped-call]
        tctx.configure(tctx.master.addons.get("proxyserver"), stream_large_bodies="4m")
        yield context
    audit.close()


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
