"""Audit of allowed traffic: which hosts did session X reach, and how much?

- ``tunnel_open`` (session, host, port, intercept) when a CONNECT is accepted;
- ``tunnel_close`` (session, host, port, intercept, bytes_up, bytes_down,
  duration_s) when the client connection ends. Bytes are counted on the client
  socket (TLS records included), so passthrough tunnels are measured too;
- ``request`` (session, host, method, path without query, status, bytes_up,
  bytes_down) for every request airlock can see: inside intercepted tunnels and
  plain http. ``bytes_*`` are body bytes as they crossed the proxy (a streamed
  response is counted chunk by chunk).

Refused flows are not repeated here: their ``refusal`` line says it all. Runs
last in the chain, after every concern that could refuse or rewrite.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from mitmproxy import connection, http

from ..audit import audit_path_of
from ..context import REFUSED, ProxyContext
from ..protocol import normalize_host

_DOWN = "airlock_bytes_down"


class _CountingStream:
    """Wraps a response ``stream`` (True or a scrubber) to count what it emits."""

    def __init__(
        self, inner: bool | Callable[[bytes], bytes | Iterable[bytes]], flow: http.HTTPFlow
    ):
        self._inner = inner
        self._flow = flow
        flow.metadata[_DOWN] = 0

    def __call__(self, chunk: bytes) -> bytes | Iterable[bytes]:
        out = self._inner(chunk) if callable(self._inner) else chunk
        if isinstance(out, bytes):
            self._flow.metadata[_DOWN] += len(out)
            return out
        parts = list(out)
        self._flow.metadata[_DOWN] += sum(len(p) for p in parts)
        return parts


class TrafficAudit:
    def __init__(self, ctx: ProxyContext) -> None:
        self.ctx = ctx

    def http_connect(self, flow: http.HTTPFlow) -> None:
        state = self.ctx.unanswered_state(flow)
        if state is None or state.tunnel is None:
            return
        t = state.tunnel
        t.opened_at = time.monotonic()
        self.ctx.audit.write(
            "tunnel_open", session=t.session_id, host=t.host, port=t.port, intercept=t.intercept
        )

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        response = flow.response
        if response is None or REFUSED in flow.metadata or not response.stream:
            return
        response.stream = _CountingStream(response.stream, flow)

    def response(self, flow: http.HTTPFlow) -> None:
        # refused() means "answered" on the request side; here the response
        # exists, so only airlock's own answers (REFUSED) are skipped.
        if REFUSED in flow.metadata or flow.response is None:
            return
        state = self.ctx.connections.get(flow.client_conn.id)
        if state is None or state.session_id is None:
            return
        tunnel = state.tunnel
        if tunnel is not None and not tunnel.intercept:  # pragma: no cover - opaque
            return
        down = flow.metadata.get(_DOWN)
        if down is None:
            down = len(flow.response.raw_content or b"")
        self.ctx.audit.write(
            "request",
            session=state.session_id,
            host=tunnel.host if tunnel is not None else normalize_host(flow.request.host),
            method=flow.request.method,
            path=audit_path_of(flow.request.path),
            status=flow.response.status_code,
            bytes_up=len(flow.request.raw_content or b""),
            bytes_down=down,
        )

    def client_disconnected(self, client: connection.Client) -> None:
        state = self.ctx.connections.get(client.id)
        if state is None or state.tunnel is None:
            return
        t = state.tunnel
        self.ctx.audit.write(
            "tunnel_close",
            session=t.session_id,
            host=t.host,
            port=t.port,
            intercept=t.intercept,
            bytes_up=state.bytes_up,
            bytes_down=state.bytes_down,
            duration_s=round(time.monotonic() - t.opened_at, 3),
            closed_by=state.closing,
        )
