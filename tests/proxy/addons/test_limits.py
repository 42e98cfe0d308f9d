"""SessionLimits and Budgets: connection cap, token-bucket rates, the read gate."""

from __future__ import annotations

import asyncio
from pathlib import Path

from airlock.proxy.addons.auth import SESSION
from airlock.proxy.addons.limits import Budgets, SessionLimits, TokenBucket
from airlock.proxy.state import Tunnel
from airlock.proxy.store.base import SessionRecord, hash_secret
from tests.proxy.addons.ops_support import connect_flow, later, make_harness, request_flow


def test_token_bucket_refills_at_its_rate() -> None:
    bucket = TokenBucket(rate=2.0, burst=3, now=0.0)
    assert [bucket.take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(0.0) == 0.5  # one token every half second
    assert bucket.take(0.5) == 0.0
    assert bucket.take(10.0) == 0.0  # never more than the burst
    assert [bucket.take(10.0) for _ in range(3)][-1] > 0


def _record() -> SessionRecord:
    return SessionRecord("s1", hash_secret("x"), (), later(60))


def test_connection_cap_answers_429_until_a_connection_closes(tmp_path: Path) -> None:
    h = make_harness(tmp_path, max_session_connections=2)
    limits = SessionLimits(h.ctx)
    flows = [connect_flow() for _ in range(3)]
    for f in flows:
        f.metadata[SESSION] = _record()
        limits.http_connect(f)
    assert [f.response.status_code if f.response else 200 for f in flows] == [200, 200, 429]
    assert flows[2].response is not None
    assert flows[2].response.headers["x-airlock-refusal"] == "connection_limit"
    h.ctx.connections.drop(flows[0].client_conn.id)
    again = connect_flow()
    again.metadata[SESSION] = _record()
    limits.http_connect(again)
    assert again.response is None


def test_rate_limit_is_429_with_retry_after_inside_a_tunnel(tmp_path: Path) -> None:
    h = make_harness(tmp_path, session_rate=0.5, session_burst=2)
    limits = SessionLimits(h.ctx)
    connect = connect_flow()
    connect.metadata[SESSION] = _record()
    limits.http_connect(connect)  # takes one token
    assert connect.response is None
    h.ctx.connections.state(connect.client_conn.id).tunnel = Tunnel(
        "s1", "api.github.com", 443, True
    )
    first, second = request_flow(connect), request_flow(connect)
    limits.requestheaders(first)
    limits.requestheaders(second)
    assert first.response is None
    assert second.response is not None and second.response.status_code == 429
    assert int(second.response.headers["retry-after"]) >= 1
    assert h.events("refusal")[-1]["reason"] == "rate_limited"


def test_zero_rate_disables_the_bucket(tmp_path: Path) -> None:
    h = make_harness(tmp_path, session_rate=0.0, session_burst=1)
    limits = SessionLimits(h.ctx)
    for _ in range(5):
        f = connect_flow()
        f.metadata[SESSION] = _record()
        limits.http_connect(f)
        assert f.response is None


def test_token_bucket_debt_is_bounded_by_the_burst() -> None:
    bucket = TokenBucket(rate=10.0, burst=5, now=0.0)
    bucket.charge(0.0, 3.0)
    assert bucket.debt(0.0) == 0.0
    bucket.charge(0.0, 100.0)
    assert bucket.debt(0.0) == 0.5  # down to minus the burst: 5 tokens at 10/s
    assert bucket.debt(0.5) == 0.0


def test_a_refused_connect_closes_and_a_refusal_costs_a_token(tmp_path: Path) -> None:
    h = make_harness(tmp_path, session_rate=1.0, session_burst=1)
    limits = SessionLimits(h.ctx)
    first, second = connect_flow(), connect_flow()
    for f in (first, second):
        f.metadata[SESSION] = _record()
        limits.http_connect(f)
    assert first.response is None
    assert second.response is not None and second.response.status_code == 429
    assert second.response.headers["connection"] == "close"
    third = connect_flow()
    third.metadata[SESSION] = _record()
    limits.http_connect(third)
    # The refusal went into debt: the next wait is longer than a fresh token's.
    assert third.response is not None
    assert int(third.response.headers["retry-after"]) >= 2


async def test_http2_streams_are_charged_when_parsed_and_the_gate_holds_reads(
    tmp_path: Path,
) -> None:
    h = make_harness(
        tmp_path, session_rate=1000.0, session_burst=1000, connection_rate=20.0, connection_burst=2
    )
    budgets = Budgets(h.ctx)
    limits = SessionLimits(h.ctx, budgets)
    connect = connect_flow()
    connect.metadata[SESSION] = _record()
    limits.http_connect(connect)
    cid = connect.client_conn.id
    h.ctx.connections.state(cid).tunnel = Tunnel("s1", "api.github.com", 443, True)
    assert budgets.wait_s(cid) == 0.0
    await asyncio.wait_for(budgets.gate(cid), 1)  # in budget: no wait
    for _ in range(3):
        budgets.h2_event(cid, "stream")
    budgets.h2_event(cid, "reset")
    budgets.h2_event(cid, "data", 16384)  # a body frame costs nothing extra
    assert 0.0 < budgets.wait_s(cid) <= 0.2  # in debt on its own bucket (20/s)
    # The HTTP/2 stream, charged when parsed, is not charged or refused again by the hook.
    flow = request_flow(connect)
    flow.request.http_version = "HTTP/2.0"
    limits.requestheaders(flow)
    assert flow.response is None
    assert h.ctx.connections.state(cid).h2_metered
    await asyncio.wait_for(budgets.gate(cid), 5)  # returns once the debt is repaid
    assert budgets.wait_s(cid) == 0.0


def test_reads_are_small_until_a_connection_is_known_not_to_speak_http2(tmp_path: Path) -> None:
    from mitmproxy import tls
    from mitmproxy.options import Options
    from mitmproxy.proxy.context import Context
    from mitmproxy.test import tflow

    from airlock.proxy.addons.limits import READ_CHUNK, READ_LARGE

    h = make_harness(tmp_path)
    budgets = Budgets(h.ctx)
    limits = SessionLimits(h.ctx, budgets)
    h2_client, h1_client, relay = (tflow.tclient_conn() for _ in range(3))
    for client, alpn in ((h2_client, b"h2"), (h1_client, b"http/1.1")):
        assert budgets.read_size(client.id) == READ_CHUNK
        client.alpn = alpn
        limits.tls_established_client(tls.TlsData(client, Context(client, Options())))
    limits.tcp_start(tflow.ttcpflow(client_conn=relay))
    assert budgets.read_size(h2_client.id) == READ_CHUNK
    assert budgets.read_size(h1_client.id) == READ_LARGE
    assert budgets.read_size(relay.id) == READ_LARGE
    limits.client_disconnected(h1_client)
    assert budgets.read_size(h1_client.id) == READ_CHUNK
