"""Which tunnels are TLS-terminated: only the intercept set.

Decided in ``tls_clienthello`` from the CONNECT destination (never from the
client's SNI): intercepted tunnels get a certificate from our name-constrained
CA and verify the upstream against the CONNECT host name; every other allowed
tunnel is passed through untouched, with the origin's own certificate.
"""

from __future__ import annotations

from typing import Any

from mitmproxy.addons.tlsconfig import alpn_select_callback
from mitmproxy.tls import ClientHelloData, TlsData
from OpenSSL import SSL

from airlock.proxy.context import ProxyContext

_MARK = "_airlock_prefers_h2"


def prefer_h2(conn: SSL.Connection, options: list[bytes]) -> Any:
    """Pick HTTP/2 whenever the client offers it and no upstream choice binds us.

    mitmproxy honours the client's ALPN order, and some HTTP/2-capable clients
    (httpx) list ``http/1.1`` first. The proxy translates h2 to an HTTP/1.1
    upstream itself, so h2 towards the sandbox is always safe.
    """
    data = conn.get_app_data()
    if (
        data["http2"]
        and data["client_alpn"] is None
        and data["server_alpn"] is None
        and b"h2" in options
    ):
        return b"h2"
    return alpn_select_callback(conn, options)


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
            ctx.set_alpn_select_callback(prefer_h2)  # type: ignore[arg-type]
            setattr(ctx, _MARK, True)
