"""ConnectionLifecycle: byte counting hook-up, first-head timeout, forgetting."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mitmproxy.test import tflow

from airlock.proxy.addons.lifecycle import ConnectionLifecycle
from tests.proxy.addons.ops_support import make_harness, request_flow


async def test_silent_connection_times_out_but_a_talking_one_does_not(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    timed_out: list[str] = []
    counters: dict[str, tuple[Callable[[int], None], Callable[[int], None]]] = {}

    def count(cid: str, up: Callable[[int], None], down: Callable[[int], None]) -> bool:
        counters[cid] = (up, down)
        return True

    life = ConnectionLifecycle(h.ctx, count, timed_out.append)
    silent, talking = tflow.tclient_conn(), tflow.tclient_conn()
    life.client_connected(silent)
    life.client_connected(talking)
    life.requestheaders(request_flow(tflow.tflow(client_conn=talking)))
    life._first_head_due(silent.id)
    life._first_head_due(talking.id)
    assert timed_out == [silent.id]

    up, down = counters[talking.id]
    up(10)
    down(200)
    state = h.ctx.connections.get(talking.id)
    assert state is not None and (state.bytes_up, state.bytes_down) == (10, 200)
    life.client_disconnected(talking)
    assert h.ctx.connections.get(talking.id) is None
