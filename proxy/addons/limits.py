"""Per-session limits: open connections and request rate.

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
  Passthrough tunnels are opaque: only their CONNECT counts.

The request-head size and timeout and the idle timeout are connection-level
and live in :mod:`airlock.proxy.mitm`.
"""

from __future__ import annotations

import math
import time

from mitmproxy import http

from airlock.proxy.addons.auth import SESSION
from airlock.proxy.context import ProxyContext, refused
from airlock.proxy.store.base import SessionRecord

_MAX_BUCKETS = 10_000


class TokenBucket:
    """``rate`` tokens a second up to ``burst``; :meth:`take` says how long to wait."""

    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.stamp = now

    def take(self, now: float) -> float:
        """0.0 when a token was taken, else the seconds until one is available."""
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class SessionLimits:
    def __init__(self, ctx: ProxyContext) -> None:
        self.ctx = ctx
        self._buckets: dict[str, TokenBucket] = {}

    def _rate_ok(self, flow: http.HTTPFlow, sid: str, host: str | None) -> bool:
        rate = self.ctx.config.session_rate
        if rate <= 0:
            return True
        now = time.monotonic()
        bucket = self._buckets.get(sid)
        if bucket is None:
            if len(self._buckets) >= _MAX_BUCKETS:
                self._prune(now)
            bucket = self._buckets[sid] = TokenBucket(rate, self.ctx.config.session_burst, now)
        wait = bucket.take(now)
        if wait <= 0:
            return True
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

    def _prune(self, now: float) -> None:
        """Forget buckets that have refilled completely (they hold no state)."""
        for sid in [s for s, b in self._buckets.items() if b.stamp + b.burst / b.rate < now]:
            del self._buckets[sid]

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

    def http_connect(self, flow: http.HTTPFlow) -> None:
        if refused(flow):
            return
        session = flow.metadata.get(SESSION)
        if not isinstance(session, SessionRecord):
            return
        if self._admit(flow, session):
            self._rate_ok(flow, session.session_id, flow.request.host)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if refused(flow):
            return
        state = self.ctx.connections.get(flow.client_conn.id)
        if state is not None and state.tunnel is not None:
            self._rate_ok(flow, state.tunnel.session_id, state.tunnel.host)
            return
        session = flow.metadata.get(SESSION)
        if isinstance(session, SessionRecord) and self._admit(flow, session):
            self._rate_ok(flow, session.session_id, flow.request.host)
