"""TrafficAudit: tunnel_open/tunnel_close with bytes, request lines."""

from __future__ import annotations

from pathlib import Path

from mitmproxy.test import tutils

from airlock.proxy.addons.audit_traffic import TrafficAudit
from airlock.proxy.addons.lifecycle import ConnectionLifecycle
from airlock.proxy.state import Tunnel
from tests.proxy.addons.ops_support import connect_flow, make_harness, request_flow


def test_tunnel_lines_and_requests(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    audit, life = TrafficAudit(h.ctx), ConnectionLifecycle(h.ctx)
    connect = connect_flow()
    state = h.ctx.connections.state(connect.client_conn.id)
    state.session_id = "s1"
    state.tunnel = Tunnel("s1", "api.github.com", 443, True)
    audit.http_connect(connect)

    flow = request_flow(connect, path="/repos/x?token=hidden")
    flow.response = tutils.tresp(content=b"0123456789")
    audit.responseheaders(flow)
    audit.response(flow)

    streamed = request_flow(connect, path="/big")
    streamed.response = tutils.tresp(content=b"")
    streamed.response.stream = lambda chunk: chunk.replace(b"REAL", b"ph")
    audit.responseheaders(streamed)
    assert callable(streamed.response.stream)
    out = [streamed.response.stream(b"aREALb"), streamed.response.stream(b"")]
    assert out == [b"aphb", b""]
    audit.response(streamed)

    state.bytes_up, state.bytes_down = 100, 2000
    audit.client_disconnected(connect.client_conn)
    life.client_disconnected(connect.client_conn)
    assert h.ctx.connections.get(connect.client_conn.id) is None

    (opened,) = h.events("tunnel_open")
    assert (opened["session"], opened["host"], opened["intercept"]) == (
        "s1",
        "api.github.com",
        True,
    )
    requests = h.events("request")
    assert [(r["path"], r["status"], r["bytes_down"]) for r in requests] == [
        ("/repos/x", 200, 10),
        ("/big", 200, 4),
    ]
    (closed,) = h.events("tunnel_close")
    assert (closed["bytes_up"], closed["bytes_down"]) == (100, 2000)
    assert "hidden" not in h.audit_path.read_text()


def test_refused_connect_opens_no_tunnel(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    connect = connect_flow()
    h.ctx.refuse(connect, 403, "host_not_allowed", "no")
    TrafficAudit(h.ctx).http_connect(connect)
    assert h.events("tunnel_open") == []
