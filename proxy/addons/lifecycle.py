"""Where a client connection's state begins and ends.

``client_connected`` wraps the client socket so bytes are counted both ways
(:func:`airlock.proxy.mitm.count_client_bytes`) and starts the clock for the
first request head: mitmproxy only creates its HTTP/1 reader once bytes
arrive, so a client that connects and sends nothing is closed here after
``--head-timeout`` (later heads are timed by :mod:`airlock.proxy.mitm`).
``client_disconnected``
forgets the connection's state (pins, scrub pairs, session counts). It runs
last in the chain so every other concern still sees the state on disconnect.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from mitmproxy import connection, http

from ..context import ProxyContext

Counter = Callable[[str, Callable[[int], None], Callable[[int], None]], bool]


class ConnectionLifecycle:
    def __init__(
        self,
        ctx: ProxyContext,
        count_bytes: Counter | None = None,
        on_head_timeout: Callable[[str], None] | None = None,
    ) -> None:
        self.ctx = ctx
        self._count_bytes = count_bytes
        self._on_head_timeout = on_head_timeout

    def _first_head_due(self, client_id: str) -> None:
        state = self.ctx.connections.get(client_id)
        if state is None or state.seen_head or state.closing is not None:
            return
        if self._on_head_timeout is not None:
            self._on_head_timeout(client_id)

    def http_connect(self, flow: http.HTTPFlow) -> None:
        self.ctx.connections.state(flow.client_conn.id).seen_head = True

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        self.ctx.connections.state(flow.client_conn.id).seen_head = True

    def client_connected(self, client: connection.Client) -> None:
        state = self.ctx.connections.state(client.id)
        asyncio.get_running_loop().call_later(
            self.ctx.config.head_timeout_s, self._first_head_due, client.id
        )
        if self._count_bytes is None:
            return

        def up(n: int) -> None:
            state.bytes_up += n

        def down(n: int) -> None:
            state.bytes_down += n

        self._count_bytes(client.id, up, down)

    def client_disconnected(self, client: connection.Client) -> None:
        self.ctx.connections.drop(client.id)
