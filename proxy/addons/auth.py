"""Session authentication: every connection proves which sandbox it is.

The sandbox's proxy URL carries ``session_id:secret``; clients send it as
``Proxy-Authorization: Basic`` on CONNECT (HTTPS) or on each plain-http request.
Without valid credentials the answer is 407. The header is always removed
before anything is forwarded, so the secret never reaches an upstream.

Inside a tunnel identity was proven at CONNECT, but every request re-checks
that the session still exists *with the generation the tunnel was opened
under*: a deleted session's tunnel, or one whose id was re-created by another
tenant, answers 407 ``session_gone`` and never swaps (the control API also
closes such connections at once; see :mod:`airlock.proxy.reaper`).

A 407 ends its connection once the answer is written (``Connection: close``):
a connection that failed to authenticate holds nothing worth keeping, and
left open it would idle for ``--idle-timeout`` counted against no session.
Until a connection proves a session it sits in the *unauthenticated pool*:
past ``--max-unauthenticated-connections`` the pool's *oldest* connection is
closed to make room for the new one (a client with credentials sends its
CONNECT within milliseconds, so it is never the oldest for long; refusing the
newcomer instead would let a few silent connections lock everyone out), and a
connection still unauthenticated ``--unauthenticated-timeout`` after it
connected is closed then. Anonymous clients can therefore hold only a small,
bounded share of the proxy's descriptors and never lock a session out.
"""

from __future__ import annotations

import asyncio
import base64
import binascii

from mitmproxy import connection, http

from ..context import ProxyContext, refused
from ..state import Tunnel
from ..store.base import SessionRecord, StoreUnavailable

SESSION = "airlock_session"


def parse_proxy_authorization(value: str | None) -> tuple[str, str] | None:
    if not value:
        return None
    scheme, _, encoded = value.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, secret = decoded.partition(":")
    if not sep or not user or not secret:
        return None
    return user, secret


class SessionAuth:
    """Resolves ``Proxy-Authorization`` to a live session, or answers 407."""

    def __init__(self, ctx: ProxyContext) -> None:
        self.ctx = ctx

    def client_connected(self, client: connection.Client) -> None:
        connections = self.ctx.connections
        pool = connections.connected(client.id)
        cap = self.ctx.config.max_unauthenticated_connections
        while pool > cap:
            oldest = connections.evict_oldest_unauthenticated()
            if oldest is None:
                break
            self._close_unauthenticated(oldest, 429, "unauthenticated_limit")
            pool -= 1
        asyncio.get_running_loop().call_later(
            self.ctx.config.unauthenticated_timeout_s, self._unauthenticated_due, client.id
        )

    def _unauthenticated_due(self, client_id: str) -> None:
        state = self.ctx.connections.get(client_id)
        if state is None or not state.unauthenticated or state.closing is not None:
            return
        self._close_unauthenticated(client_id, 408, "unauthenticated_timeout")

    def _close_unauthenticated(self, client_id: str, status: int, reason: str) -> None:
        self.ctx.metrics.refusals.labels(reason=reason).inc()
        self.ctx.audit.write("refusal", reason=reason, status=status)
        self.ctx.connections.kill(client_id, reason)

    def _refuse_407(self, flow: http.HTTPFlow, reason: str, message: str, **fields: str) -> None:
        """Answer 407 and end the connection once the answer is out."""
        self.ctx.refuse(flow, 407, reason, message, **fields)
        assert flow.response is not None
        if not flow.request.http_version.startswith("HTTP/2"):
            flow.response.headers["connection"] = "close"

    async def _authenticate(self, flow: http.HTTPFlow) -> SessionRecord | None:
        creds = parse_proxy_authorization(flow.request.headers.get("proxy-authorization"))
        flow.request.headers.pop("proxy-authorization", None)
        if creds is None:
            self._refuse_407(flow, "proxy_auth_required", "proxy credentials required")
            return None
        sid, secret = creds
        try:
            session = await self.ctx.store.get_session(sid)
        except StoreUnavailable:
            self.ctx.refuse(
                flow, 503, "store_unavailable", "session store unavailable", session=sid
            )
            return None
        if session is None or not session.check_secret(secret):
            self._refuse_407(flow, "proxy_auth_failed", "unknown session or bad secret")
            return None
        flow.metadata[SESSION] = session
        self.ctx.connections.authenticated(
            flow.client_conn.id, session.session_id, session.generation
        )
        return session

    async def http_connect(self, flow: http.HTTPFlow) -> None:
        if refused(flow):
            return
        await self._authenticate(flow)

    async def requestheaders(self, flow: http.HTTPFlow) -> None:
        if refused(flow):
            return
        state = self.ctx.connections.get(flow.client_conn.id)
        if state is not None and state.tunnel is not None:
            # Inside an accepted tunnel: identity was proven at CONNECT.
            flow.request.headers.pop("proxy-authorization", None)
            await self._check_generation(flow, state.tunnel)
            return
        await self._authenticate(flow)

    async def _check_generation(self, flow: http.HTTPFlow, tunnel: Tunnel) -> None:
        sid = tunnel.session_id
        try:
            session = await self.ctx.store.get_session(sid)
        except StoreUnavailable:
            self.ctx.refuse(
                flow, 503, "store_unavailable", "session store unavailable", session=sid
            )
            return
        if session is None or session.generation != tunnel.generation:
            self._refuse_407(
                flow,
                "session_gone",
                "this tunnel's session was deleted or expired; open a new connection "
                "with the current proxy URL",
                session=sid,
                host=tunnel.host,
            )
