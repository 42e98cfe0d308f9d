"""Which tunnels are TLS-terminated: only the intercept set.

Decided in ``tls_clienthello`` from the CONNECT destination (never from the
client's SNI): intercepted tunnels get a certificate from our name-constrained
CA and verify the upstream against the CONNECT host name; every other allowed
tunnel is passed through untouched, with the origin's own certificate.
"""

from __future__ import annotations

from mitmproxy.tls import ClientHelloData

from airlock.proxy.context import ProxyContext


class InterceptDecision:
    def __init__(self, ctx: ProxyContext) -> None:
        self.ctx = ctx

    def tls_clienthello(self, data: ClientHelloData) -> None:
        state = self.ctx.connections.get(data.context.client.id)
        tunnel = state.tunnel if state is not None else None
        if tunnel is None or not tunnel.intercept:
            data.ignore_connection = True
            return
        # Upstream SNI and certificate verification use the CONNECT host name.
        data.context.server.sni = tunnel.host
        data.context.client.sni = tunnel.host
