"""InterceptDecision in process: which tunnels are TLS-terminated, and with which names.

Every outcome of ``tls_clienthello``: a connection the policy never accepted
and a passthrough tunnel are left untouched (``ignore_connection``); an
intercepted tunnel verifies the upstream against the CONNECT host, whatever
SNI the sandbox sent. ``tls_start_client`` offers only HTTP/1.1 to the sandbox.
"""

from __future__ import annotations

from mitmproxy import connection
from mitmproxy.options import Options
from mitmproxy.proxy import context
from mitmproxy.test import tflow
from mitmproxy.tls import ClientHelloData, TlsData
from OpenSSL import SSL

from airlock.proxy.addons.intercept import InterceptDecision
from airlock.proxy.context import ProxyContext
from airlock.proxy.mitm import select_http1
from airlock.proxy.state import Tunnel


def ctx_options() -> Options:
    return Options()


def _hello(ctx: ProxyContext, sni: str | None) -> ClientHelloData:
    client = tflow.tclient_conn()
    client.sni = sni
    server = connection.Server(address=("api.github.com", 443))
    tls_ctx = context.Context(client, ctx_options())
    tls_ctx.server = server
    return ClientHelloData(tls_ctx, client_hello=None)  # type: ignore[arg-type]  # unused by the hook


def test_a_connection_without_a_tunnel_is_never_intercepted(ctx: ProxyContext) -> None:
    data = _hello(ctx, sni="api.github.com")
    InterceptDecision(ctx).tls_clienthello(data)
    assert data.ignore_connection is True


def test_a_passthrough_tunnel_keeps_the_origins_own_tls(ctx: ProxyContext) -> None:
    data = _hello(ctx, sni="registry.npmjs.org")
    ctx.connections.state(data.context.client.id).tunnel = Tunnel(
        session_id="s1", host="registry.npmjs.org", port=443, intercept=False
    )
    InterceptDecision(ctx).tls_clienthello(data)
    assert data.ignore_connection is True


def test_an_intercepted_tunnel_uses_the_connect_host_not_the_sandboxs_sni(
    ctx: ProxyContext,
) -> None:
    data = _hello(ctx, sni="evil.example")
    ctx.connections.state(data.context.client.id).tunnel = Tunnel(
        session_id="s1", host="api.github.com", port=443, intercept=True
    )
    InterceptDecision(ctx).tls_clienthello(data)
    assert data.ignore_connection is False
    assert data.context.server.sni == "api.github.com"
    assert data.context.client.sni == "api.github.com"


def test_the_sandbox_is_offered_http1_only(ctx: ProxyContext) -> None:
    ssl_ctx = SSL.Context(SSL.TLS_METHOD)
    conn = SSL.Connection(ssl_ctx)
    client = tflow.tclient_conn()
    data = TlsData(client, context.Context(client, ctx_options()), ssl_conn=conn)
    decision = InterceptDecision(ctx)
    decision.tls_start_client(data)
    decision.tls_start_client(data)  # idempotent on the shared, cached context
    assert getattr(ssl_ctx, "_airlock_http1_only", False) is True
    assert select_http1(conn, [b"h2", b"http/1.1"]) == b"http/1.1"
    assert select_http1(conn, [b"h2"]) is SSL.NO_OVERLAPPING_PROTOCOLS


def test_no_ssl_connection_yet_is_left_alone(ctx: ProxyContext) -> None:
    client = tflow.tclient_conn()
    data = TlsData(client, context.Context(client, ctx_options()), ssl_conn=None)
    InterceptDecision(ctx).tls_start_client(data)  # nothing to configure, no error
