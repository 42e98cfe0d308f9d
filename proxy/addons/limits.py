"""Per-session and per-connection limits: open connections, request rate, floods.

Runs right after :class:`~airlock.proxy.addons.auth.SessionAuth`, before any
egress decision, so a session over its limits costs no DNS lookup and no
upstream connection.

- **Connections**: a client connection counts against the session it first
  authenticates as, until it closes. Past ``--max-connections-per-session``
  the CONNECT (or plain-http request) is answered 429 ``connection_limit``.
- **Rate**: one token bucket per session (``--session-rate`` tokens a second,
  ``--session-burst`` deep). Every CONNECT, every plain-http request and every
  request inside an intercepted tunnel takes a token; without one the answer
  is 429 ``rate_limited`` with ``Retry-After`` (whole seconds, at least 1).
  Passthrough tunnels are opaque: only their CONNECT counts. A refused request
  still costs its session a token (the bucket may go into debt, down to minus
  its burst), so retrying in a loop only prolongs the wait.
- **Floods** (the proxy is one event loop: a session that makes it work without
  bound takes it from every other session). Each connection has a bucket of
  its own (``--connection-rate`` a second, ``--connection-burst`` deep).
  Every request costs one token of its connection's bucket; on HTTP/2 every
  new stream and every stream the client resets costs one token of *both* the
  connection's and the session's bucket (small frames such as PING, SETTINGS
  or an empty DATA cost a twentieth), counted as the frames are parsed,
  before any hook runs. While either bucket is in debt, the proxy does not
  read that connection at all (:meth:`Budgets.gate`, wired into mitmproxy's
  reads by :mod:`airlock.proxy.mitm`), and each read takes a turn of the event
  loop and is at most :data:`READ_CHUNK` bytes until the connection is known
  not to speak HTTP/2 (then :data:`READ_LARGE`: HTTP/1.1 and relayed bytes are
  cheap), so no single read can hold the loop. A rapid reset, a request flood over
  keep-alive or many connections at once therefore get the flooding session
  no more than its rate, and every other session's CONNECT is still answered
  within a second. HTTP/2 streams over the session's rate wait (the
  connection is not read) rather than being answered 429.

The request-head size and timeout and the idle timeout are connection-level
and live in :mod:`airlock.proxy.mitm`.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

from mitmproxy import connection, http, tcp, tls

from ..context import ProxyContext, refused
from ..store.base import SessionRecord
from .auth import SESSION

_MAX_BUCKETS = 10_000
# The most one read of a client connection hands to mitmproxy (HTTP/2 parsing
# of 64 KiB of rapid-reset frames takes a quarter of a second on one core).
READ_CHUNK = 4 * 1024
# Connections known not to speak HTTP/2 (HTTP/1.1 after TLS, plain http,
# passthrough tunnels) read as much as mitmproxy asks: their bytes are cheap
# to handle (bodies and relayed bytes; one request head at a time).
READ_LARGE = 64 * 1024
# What a small HTTP/2 frame (not a new stream or a reset) costs.
FRAME_COST = 0.05
# DATA frames at least this large carry a body and cost nothing extra.
BODY_FRAME = 1024


class TokenBucket:
    """``rate`` tokens a second up to ``burst``; :meth:`take` says how long to wait."""

    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.stamp = now

    def _refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self, now: float) -> float:
        """0.0 when a token was taken, else the seconds until one is available."""
        self._refill(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate

    def charge(self, now: float, cost: float) -> None:
        """Spend ``cost`` whether or not it is there: debt down to minus the burst."""
        self._refill(now)
        self.tokens = max(-self.burst, self.tokens - cost)

    def debt(self, now: float) -> float:
        """Seconds until the bucket is out of debt (0.0 when it is not in debt)."""
        self._refill(now)
        return 0.0 if self.tokens >= 0.0 else -self.tokens / self.rate


Gate = Callable[[], Awaitable[None]]
# Wires a connection's reads to a gate: (client id, gate, read size) -> wired.
ReadWirer = Callable[[str, Gate, Callable[[], int]], bool]


def _bucket(
    table: dict[str, TokenBucket], key: str, rate: float, burst: int, now: float
) -> TokenBucket | None:
    """The bucket of ``key`` in ``table``, created on first use; None when
    ``rate`` is 0 (that limit is off)."""
    if rate <= 0:
        return None
    bucket = table.get(key)
    if bucket is None:
        bucket = table[key] = TokenBucket(rate, burst, now)
    return bucket


class Budgets:
    """The token buckets of every session and connection, and the read gate.

    Not a concern: :class:`SessionLimits` (the hooks) and the mitmproxy
    wiring (the read gate, the HTTP/2 meter) share one instance.
    """

    def __init__(self, ctx: ProxyContext) -> None:
        self.ctx = ctx
        self._buckets: dict[str, TokenBucket] = {}
        # client connection id -> its own bucket (created on first use).
        self._per_connection: dict[str, TokenBucket] = {}
        # Connections known not to speak HTTP/2 (see READ_LARGE).
        self._cheap: set[str] = set()

    def session_bucket(self, sid: str, now: float) -> TokenBucket | None:
        if sid not in self._buckets and len(self._buckets) >= _MAX_BUCKETS:
            self._prune(now)
        config = self.ctx.config
        return _bucket(self._buckets, sid, config.session_rate, config.session_burst, now)

    def _connection_bucket(self, client_id: str, now: float) -> TokenBucket | None:
        config = self.ctx.config
        return _bucket(
            self._per_connection, client_id, config.connection_rate, config.connection_burst, now
        )

    def _session_of(self, client_id: str) -> str | None:
        state = self.ctx.connections.get(client_id)
        if state is None:
            return None
        if state.tunnel is not None:
            return state.tunnel.session_id
        return state.counted or state.session_id

    def charge(self, client_id: str, cost: float, *, session: bool = True) -> None:
        """Spend ``cost`` from the connection's bucket (and its session's)."""
        now = time.monotonic()
        own = self._connection_bucket(client_id, now)
        if own is not None:
            own.charge(now, cost)
        sid = self._session_of(client_id) if session else None
        if sid is not None:
            shared = self.session_bucket(sid, now)
            if shared is not None:
                shared.charge(now, cost)

    def wait_s(self, client_id: str) -> float:
        """How long reading this connection must pause (0.0: read on)."""
        now = time.monotonic()
        wait = 0.0
        own = self._per_connection.get(client_id)
        if own is not None:
            wait = own.debt(now)
        sid = self._session_of(client_id)
        shared = self._buckets.get(sid) if sid is not None else None
        if shared is not None:
            wait = max(wait, shared.debt(now))
        return wait

    async def gate(self, client_id: str) -> None:
        """Return once this connection may be read again (at once when in budget)."""
        while (wait := self.wait_s(client_id)) > 0:
            state = self.ctx.connections.get(client_id)
            if state is None or state.closing is not None:
                return
            await asyncio.sleep(max(wait, 0.005))

    def h2_event(self, client_id: str, kind: str, size: int = 0) -> None:
        """An HTTP/2 frame event from a client, before mitmproxy acts on it."""
        state = self.ctx.connections.get(client_id)
        if state is not None:
            state.h2_metered = True
        if kind in ("stream", "reset"):
            self.charge(client_id, 1.0)
        elif not (kind == "data" and size >= BODY_FRAME):
            self.charge(client_id, FRAME_COST)

    def _prune(self, now: float) -> None:
        """Forget buckets that have refilled completely (they hold no state)."""
        for sid in [s for s, b in self._buckets.items() if b.stamp + (2 * b.burst) / b.rate < now]:
            del self._buckets[sid]

    def forget_connection(self, client_id: str) -> None:
        self._per_connection.pop(client_id, None)
        self._cheap.discard(client_id)

    def read_size(self, client_id: str) -> int:
        """How much one read of this client may hand to mitmproxy."""
        return READ_LARGE if client_id in self._cheap else READ_CHUNK

    def not_http2(self, client_id: str) -> None:
        """This connection will not speak HTTP/2 to the proxy: read it in large chunks."""
        self._cheap.add(client_id)


class SessionLimits:
    def __init__(
        self,
        ctx: ProxyContext,
        budgets: Budgets | None = None,
        wire_reads: ReadWirer | None = None,
    ) -> None:
        self.ctx = ctx
        self._budgets = budgets or Budgets(ctx)
        self._wire_reads = wire_reads

    # -- the request rate (429) ----------------------------------------------
    def _rate_ok(self, flow: http.HTTPFlow, sid: str, host: str | None) -> bool:
        now = time.monotonic()
        bucket = self._budgets.session_bucket(sid, now)
        if bucket is None:
            return True
        wait = bucket.take(now)
        if wait <= 0:
            return True
        bucket.charge(now, 1.0)  # a refused request costs too: retrying in a loop only waits
        retry = max(1, math.ceil(wait))
        self.ctx.refuse(
            flow,
            429,
            "rate_limited",
            f"session {sid} is over its request rate; retry after {retry} s",
            session=sid,
            host=host,
        )
        assert flow.response is not None
        flow.response.headers["retry-after"] = str(retry)
        return False

    def _admit(self, flow: http.HTTPFlow, session: SessionRecord) -> bool:
        connections = self.ctx.connections
        state = connections.state(flow.client_conn.id)
        if state.counted is not None:
            return True
        cap = self.ctx.config.max_session_connections
        if connections.count_for(session.session_id) >= cap:
            self.ctx.refuse(
                flow,
                429,
                "connection_limit",
                f"session {session.session_id} already has {cap} open connections; "
                "close some or reuse them",
                session=session.session_id,
            )
            assert flow.response is not None
            flow.response.headers["retry-after"] = "1"
            return False
        connections.admit(flow.client_conn.id, session.session_id)
        return True

    @staticmethod
    def _close_after(flow: http.HTTPFlow) -> None:
        """A refused CONNECT leaves nothing to keep the connection open for."""
        if flow.response is not None and not flow.request.http_version.startswith("HTTP/2"):
            flow.response.headers["connection"] = "close"

    # -- hooks ---------------------------------------------------------------
    def client_connected(self, client: connection.Client) -> None:
        if self._wire_reads is not None:
            client_id = client.id
            budgets = self._budgets
            self._wire_reads(
                client_id, lambda: budgets.gate(client_id), lambda: budgets.read_size(client_id)
            )

    def tls_established_client(self, data: tls.TlsData) -> None:
        if data.conn.alpn != b"h2":
            self._budgets.not_http2(data.context.client.id)

    def tcp_start(self, flow: tcp.TCPFlow) -> None:
        self._budgets.not_http2(flow.client_conn.id)  # a passthrough tunnel: relayed bytes

    def client_disconnected(self, client: connection.Client) -> None:
        self._budgets.forget_connection(client.id)

    def http_connect(self, flow: http.HTTPFlow) -> None:
        if refused(flow):
            return
        session = flow.metadata.get(SESSION)
        if not isinstance(session, SessionRecord):
            return
        self._budgets.charge(flow.client_conn.id, 1.0, session=False)
        if not (
            self._admit(flow, session)
            and self._rate_ok(flow, session.session_id, flow.request.host)
        ):
            self._close_after(flow)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if refused(flow):
            return
        client_id = flow.client_conn.id
        state = self.ctx.connections.get(client_id)
        if state is not None and state.h2_metered and flow.request.http_version == "HTTP/2.0":
            # Charged when its HEADERS frame was parsed (h2_event); over the
            # rate, the connection waits instead of being answered 429.
            return
        self._budgets.charge(client_id, 1.0, session=False)
        if flow.request.http_version.startswith("HTTP/1"):
            self._budgets.not_http2(client_id)
        if state is not None and state.tunnel is not None:
            self._rate_ok(flow, state.tunnel.session_id, state.tunnel.host)
            return
        session = flow.metadata.get(SESSION)
        if isinstance(session, SessionRecord) and self._admit(flow, session):
            self._rate_ok(flow, session.session_id, flow.request.host)
