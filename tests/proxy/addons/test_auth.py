"""SessionAuth: 407 without credentials, and the generation check in tunnels."""

from __future__ import annotations

from pathlib import Path

from airlock.proxy.addons.auth import SESSION, SessionAuth
from airlock.proxy.state import Tunnel
from airlock.proxy.store.base import SessionRecord, hash_secret
from tests.proxy.addons.ops_support import connect_flow, later, make_harness, request_flow
from tests.proxy.helpers import basic


async def _session(h: object, sid: str = "s1", secret: str = "pw") -> SessionRecord:
    record = SessionRecord(sid, hash_secret(secret), ("api.github.com",), later(60))
    assert await h.ctx.store.create_session(record)  # type: ignore[attr-defined]
    return record


async def test_connect_without_or_with_bad_credentials_is_407(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    await _session(h)
    auth = SessionAuth(h.ctx)
    for header in (None, basic("s1", "wrong"), "Bearer x"):
        flow = connect_flow(auth=header)
        await auth.http_connect(flow)
        assert flow.response is not None and flow.response.status_code == 407


async def test_good_credentials_bind_session_and_generation(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    record = await _session(h)
    flow = connect_flow(auth=basic("s1", "pw"))
    await SessionAuth(h.ctx).http_connect(flow)
    assert flow.response is None
    assert flow.metadata[SESSION] == record
    state = h.ctx.connections.get(flow.client_conn.id)
    assert state is not None and state.generation == record.generation
    assert "proxy-authorization" not in flow.request.headers


async def test_tunnel_of_a_recreated_session_is_refused(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    old = await _session(h)
    connect = connect_flow(auth=basic("s1", "pw"))
    state = h.ctx.connections.state(connect.client_conn.id)
    state.session_id = "s1"
    state.tunnel = Tunnel("s1", "api.github.com", 443, True, generation=old.generation)
    auth = SessionAuth(h.ctx)

    same = request_flow(connect)
    await auth.requestheaders(same)
    assert same.response is None

    await h.ctx.store.delete_session("s1")
    new = await _session(h, secret="other")
    assert new.generation != old.generation
    after = request_flow(connect)
    await auth.requestheaders(after)
    assert after.response is not None and after.response.status_code == 407
    assert after.response.headers["x-airlock-refusal"] == "session_gone"


async def test_407_ends_its_connection_after_the_answer(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    await _session(h)
    auth = SessionAuth(h.ctx)
    for header in (None, basic("s1", "wrong")):
        flow = connect_flow(auth=header)
        await auth.http_connect(flow)
        assert flow.response is not None and flow.response.status_code == 407
        assert flow.response.headers["connection"] == "close"


async def test_unauthenticated_pool_evicts_its_oldest_and_times_out(tmp_path: Path) -> None:
    from mitmproxy.test import tflow

    h = make_harness(tmp_path, max_unauthenticated_connections=2, unauthenticated_timeout_s=30)
    await _session(h)
    auth = SessionAuth(h.ctx)
    clients = [tflow.tclient_conn() for _ in range(3)]
    for client in clients:
        auth.client_connected(client)
    # The third made room by closing the first (the oldest), not itself.
    assert h.killed == [(clients[0].id, "unauthenticated_limit")]
    assert h.ctx.connections.unauthenticated() == 2
    # Proving a session leaves the pool; the timer then spares the connection.
    flow = connect_flow(auth=basic("s1", "pw"))
    flow.client_conn = clients[1]
    await auth.http_connect(flow)
    assert h.ctx.connections.unauthenticated() == 1
    auth._unauthenticated_due(clients[1].id)
    auth._unauthenticated_due(clients[2].id)
    assert h.killed[1:] == [(clients[2].id, "unauthenticated_timeout")]
    h.ctx.connections.drop(clients[2].id)
    assert h.ctx.connections.unauthenticated() == 0
    reasons = [e["reason"] for e in h.events("refusal")]
    assert reasons == ["unauthenticated_limit", "unauthenticated_timeout"]


async def test_each_407_names_its_reason(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    await _session(h)
    auth = SessionAuth(h.ctx)
    cases = [
        (None, "proxy_auth_required"),
        ("Bearer not-basic", "proxy_auth_required"),
        (basic("s1", "wrong"), "proxy_auth_failed"),
        (basic("nobody", "pw"), "proxy_auth_failed"),
    ]
    for header, reason in cases:
        flow = connect_flow(auth=header)
        await auth.http_connect(flow)
        assert flow.response is not None and flow.response.status_code == 407, header
        assert flow.response.headers["x-airlock-refusal"] == reason, header
        assert flow.response.headers["proxy-authenticate"] == 'Basic realm="airlock-proxy"'
        assert "proxy-authorization" not in flow.request.headers
    assert [e["reason"] for e in h.events("refusal")] == [reason for _, reason in cases]


async def test_an_unreachable_store_is_503_at_connect_and_in_a_tunnel(tmp_path: Path) -> None:
    """A real Redis client towards a port nobody listens on: auth fails closed."""
    from airlock.proxy.store.redis import RedisStore
    from tests.fakes.net import free_port

    h = make_harness(tmp_path)
    h.ctx.store = RedisStore(f"redis://127.0.0.1:{free_port()}")
    auth = SessionAuth(h.ctx)
    try:
        connect = connect_flow(auth=basic("s1", "pw"))
        await auth.http_connect(connect)
        assert connect.response is not None and connect.response.status_code == 503
        assert connect.response.headers["x-airlock-refusal"] == "store_unavailable"

        state = h.ctx.connections.state(connect.client_conn.id)
        state.session_id = "s1"
        state.tunnel = Tunnel("s1", "api.github.com", 443, True, generation="g")
        inside = request_flow(connect)
        await auth.requestheaders(inside)
        assert inside.response is not None and inside.response.status_code == 503
        assert inside.response.headers["x-airlock-refusal"] == "store_unavailable"
    finally:
        await h.ctx.store.close()
