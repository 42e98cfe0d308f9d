"""Which tunnels are TLS-terminated: only the intercept set.

Decided in ``tls_clienthello`` from the CONNECT destination (never from the
client's SNI): intercepted tunnels get a certificate from our name-constrained
CA and verify the upstream against the CONNECT host name; every other allowed
tunnel is passed through untouched, with the origin's own certificate.

Intercepted tunnels speak HTTP/1.1 to the sandbox whatever it offers
(:func:`airlock.proxy.mitm.alpn.select_http1`), so the connection-level guard
(:mod:`airlock.proxy.guard`) has one framing to parse; the upstream side
still uses HTTP/2 when the sandbox offered it and the upstream agrees.
"""

from __future__ import annotations

from mitmproxy.tls import ClientHelloData, TlsData

from ..context import ProxyContext
from ..mitm import select_http1

_MARK = "_airlock_http1_only"


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

    def tls_start_client(self, data: TlsData) -> None:
        """Runs after mitmproxy's TlsConfig built the context (cached, shared)."""
        if data.ssl_conn is None:
            return
        ctx = data.ssl_conn.get_context()
        if not getattr(ctx, _MARK, False):
            ctx.set_alpn_select_callback(select_http1)  # type: ignore[arg-type]
            setattr(ctx, _MARK, True)
