"""Egress policy: allow-lists, address checks and address pinning.

Decisions are made at CONNECT (for tunnels) and per plain-http request, and
the pinned address is what ``server_connect`` dials: mitmproxy never resolves
a name itself. The requested host name is restored on the server connection
once connected, so TLS verification, certificate generation and lease matching
all keep using the name, never the address.
"""

from __future__ import annotations

from mitmproxy import http
from mitmproxy.proxy.server_hooks import ServerConnectionHookData

from ..context import ProxyContext, refused
from ..egress import Refused
from ..protocol import normalize_host
from ..state import Tunnel
from ..store.base import SessionRecord
from .auth import SESSION


class EgressPolicy:
    def __init__(self, ctx: ProxyContext) -> None:
        self.ctx = ctx

    async def _decide(self, flow: http.HTTPFlow, *, tunnel: bool) -> None:
        session = flow.metadata.get(SESSION)
        if not isinstance(session, SessionRecord):
            self.ctx.refuse(flow, 407, "proxy_auth_required", "proxy credentials required")
            return
        host = normalize_host(flow.request.host)
        port = flow.request.port
        decision = await self.ctx.egress.decide(session, host, port, tunnel=tunnel)
        if isinstance(decision, Refused):
            self.ctx.refuse(
                flow,
                decision.status,
                decision.reason,
                decision.message,
                session=session.session_id,
                host=host,
                port=port,
            )
            return
        state = self.ctx.connections.state(flow.client_conn.id)
        state.session_id = session.session_id
        state.generation = session.generation
        state.pins[(host, port)] = decision.pinned
        flow.request.host = host
        if tunnel:
            state.tunnel = Tunnel(
                session_id=session.session_id,
                host=host,
                port=port,
                intercept=decision.intercept,
                generation=session.generation,
            )

    async def http_connect(self, flow: http.HTTPFlow) -> None:
        if refused(flow):
            return
        await self._decide(flow, tunnel=True)

    async def requestheaders(self, flow: http.HTTPFlow) -> None:
        if refused(flow):
            return
        state = self.ctx.connections.get(flow.client_conn.id)
        if state is not None and state.tunnel is not None:
            t = state.tunnel
            if t.intercept and not flow.client_conn.tls_established:
                self.ctx.refuse(
                    flow,
                    403,
                    "plain_http_intercepted",
                    f"{t.host} is only reachable over https",
                    session=t.session_id,
                    host=t.host,
                )
            elif (normalize_host(flow.request.host), flow.request.port) != (t.host, t.port):
                self.ctx.refuse(
                    flow,
                    403,
                    "tunnel_mismatch",
                    "request does not match its tunnel's destination",
                    session=t.session_id,
                    host=t.host,
                )
            return
        await self._decide(flow, tunnel=False)

    def server_connect(self, data: ServerConnectionHookData) -> None:
        address = data.server.address
        state = self.ctx.connections.get(data.client.id)
        pinned = None
        if state is not None and address is not None:
            pinned = state.pins.get((normalize_host(address[0]), address[1]))
        if pinned is None or address is None:
            data.server.error = "airlock: no egress decision for this destination"
            self.ctx.metrics.refusals.labels(reason="no_egress_decision").inc()
            self.ctx.audit.write(
                "refusal",
                reason="no_egress_decision",
                session=state.session_id if state else None,
                host=address[0] if address else None,
            )
            return
        self.ctx.connections.start_dial(data.server.id, address)
        data.server.address = pinned

    def _restore(self, data: ServerConnectionHookData) -> None:
        requested = self.ctx.connections.end_dial(data.server.id)
        if requested is not None:
            # mitmproxy forbids changing the address of an open connection (it
            # would not redial); we only relabel the socket we already opened
            # to the pinned address with the name it was opened for.
            object.__setattr__(data.server, "address", requested)

    def server_connected(self, data: ServerConnectionHookData) -> None:
        self._restore(data)

    def server_connect_error(self, data: ServerConnectionHookData) -> None:
        self._restore(data)
