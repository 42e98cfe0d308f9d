"""Session authentication: every connection proves which sandbox it is.

The sandbox's proxy URL carries ``session_id:secret``; clients send it as
``Proxy-Authorization: Basic`` on CONNECT (HTTPS) or on each plain-http request.
Without valid credentials the answer is 407. The header is always removed
before anything is forwarded, so the secret never reaches an upstream.
"""

from __future__ import annotations

import base64
import binascii

from mitmproxy import http

from airlock.proxy.context import ProxyContext, refused
from airlock.proxy.store.base import SessionRecord, StoreUnavailable

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

    async def _authenticate(self, flow: http.HTTPFlow) -> SessionRecord | None:
        creds = parse_proxy_authorization(flow.request.headers.get("proxy-authorization"))
        flow.request.headers.pop("proxy-authorization", None)
        if creds is None:
            self.ctx.refuse(flow, 407, "proxy_auth_required", "proxy credentials required")
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
            self.ctx.refuse(flow, 407, "proxy_auth_failed", "unknown session or bad secret")
            return None
        flow.metadata[SESSION] = session
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
            return
        await self._authenticate(flow)
