"""Where a client connection's state begins and ends.

``client_connected`` wraps the client socket so bytes are counted both ways
(:func:`airlock.proxy.mitm.count_client_bytes`); ``client_disconnected``
forgets the connection's state (pins, scrub pairs, session counts). It runs
last in the chain so every other concern still sees the state on disconnect.
"""

from __future__ import annotations

from collections.abc import Callable

from mitmproxy import connection

from airlock.proxy.context import ProxyContext

Counter = Callable[[str, Callable[[int], None], Callable[[int], None]], bool]


class ConnectionLifecycle:
    def __init__(self, ctx: ProxyContext, count_bytes: Counter | None = None) -> None:
        self.ctx = ctx
        self._count_bytes = count_bytes

    def client_connected(self, client: connection.Client) -> None:
        state = self.ctx.connections.state(client.id)
        if self._count_bytes is None:
            return

        def up(n: int) -> None:
            state.bytes_up += n

        def down(n: int) -> None:
            state.bytes_down += n

        self._count_bytes(client.id, up, down)

    def client_disconnected(self, client: connection.Client) -> None:
        self.ctx.connections.drop(client.id)
