"""Response scrubbing: a real token never reaches the sandbox, by any path.

On an intercepted host, every byte the sandbox can read passes through the one
matcher in :mod:`airlock.proxy.scrubber` (the connection's swapped tokens, in
their raw, Basic and base64 forms, mapped back to what the sandbox sent):

- the reason phrase, header names and values (``responseheaders``);
- nothing at all after a head whose status or request forbids a body (1xx,
  204, 304, answers to HEAD): an HTTP/2 upstream can still send DATA frames
  for it, and they are dropped, never relayed;
- the body. The decision is made at ``responseheaders``, before mitmproxy's
  own: mitmproxy only learns that a chunked or close-delimited body is large
  after it has started buffering it, and then streams it *raw*. So a body is
  buffered (and scrubbed whole in ``response``) only when its Content-Length
  says it fits the buffer limit and it is not content-encoded; every other body
  (chunked, close-delimited, HTTP/2 without a length, large, or encoded) is
  streamed through a :class:`~airlock.proxy.scrubber.StreamScrubber`, decoded
  on the way (Content-Encoding and Content-Length are dropped, the body goes
  on decoded). Transfer codings other than chunked (``Transfer-Encoding: gzip,
  chunked`` or a bare ``gzip``, which mitmproxy relays as is) are decoded the
  same way. An unknown encoding is answered with airlock's own 502; a body
  that turns out undecodable mid-stream, or decodes past the size or ratio
  limit (``decoded_too_large``, a compression bomb), aborts the connection;
- trailers (``response``, streamed or not; HTTP/1 trailer fields are dropped
  by :mod:`airlock.proxy.mitm.trailers`, mitmproxy cannot relay them);
- WebSocket messages (``websocket_message``) and control frames (close
  reason, ping, pong: see :mod:`airlock.proxy.mitm.upgrade`).

A 101 answer that does not set up a WebSocket is refused (502), on every host
the HTTP layer sees: mitmproxy would otherwise relay the connection as raw TCP,
where nothing is scrubbed. WebSocket upgrades on intercepted tunnels go out
without ``Sec-WebSocket-Extensions``: compressed frames would hide their
payload from the connection-level guard (:mod:`airlock.proxy.guard`), which
refuses them.

Everything here is a hook on mitmproxy's flows; the guard below them is the
last line for any path these hooks miss.
"""

from __future__ import annotations

from collections.abc import Mapping

from mitmproxy import http
from mitmproxy.net.http import status_codes
from mitmproxy.net.http.http1 import expected_http_body_size
from mitmproxy.utils import human

from ..context import REFUSED, ProxyContext
from ..scrubber import (
    ChainDecoder,
    DecodeBudget,
    DecodedTooLarge,
    DecodeError,
    StreamScrubber,
    parse_codings,
    scrub,
    scrub_name,
    supported,
)

DEFAULT_BUFFER_LIMIT = 4 * 1024 * 1024


def _buffer_limit() -> int:
    """mitmproxy's ``stream_large_bodies`` (what it would buffer at most)."""
    try:
        from mitmproxy import ctx

        size = human.parse_size(ctx.options.stream_large_bodies)
    except (AttributeError, ValueError):
        size = None
    return size if size is not None else DEFAULT_BUFFER_LIMIT


def _scrub_fields(
    fields: tuple[tuple[bytes, bytes], ...], pairs: Mapping[bytes, bytes]
) -> tuple[tuple[bytes, bytes], ...] | None:
    """Scrubbed header fields, or None when nothing changed."""
    out = tuple((scrub_name(n, pairs), scrub(v, pairs)) for n, v in fields)
    return out if out != fields else None


class _Swallow:
    """Stream callable for a response we replaced: drop upstream bytes, send ours."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def __call__(self, chunk: bytes) -> list[bytes]:
        return [] if chunk else [self.body]


class _Aborting:
    """Wraps a StreamScrubber: an undecodable body is cut off, never relayed.

    After a decode error the rest of the body is dropped and the flow killed:
    at the end of the stream mitmproxy then closes the client connection (or
    resets the HTTP/2 stream) without ending the body, so the sandbox sees a
    truncated response, not bytes nobody inspected.
    """

    def __init__(self, inner: StreamScrubber, flow: http.HTTPFlow, ctx: ProxyContext) -> None:
        self.inner = inner
        self.flow = flow
        self.ctx = ctx
        self.failed = False

    def __call__(self, chunk: bytes) -> list[bytes]:
        if self.failed:
            return []
        try:
            return self.inner(chunk)
        except DecodeError as exc:
            self.failed = True
            reason = (
                "decoded_too_large" if isinstance(exc, DecodedTooLarge) else "unscrubbable_response"
            )
            self.ctx.metrics.refusals.labels(reason=reason).inc()
            self.ctx.audit.write("refusal", reason=reason, status=502, stage="stream")
            if self.flow.killable:
                self.flow.kill()  # type: ignore[no-untyped-call]
            return []


def _drop(chunk: bytes) -> list[bytes]:
    """Stream callable for a response that may not have a body: nothing goes out."""
    return []


def _transfer_codings(response: http.Response) -> list[str]:
    """Transfer codings other than chunked, in the order they were applied."""
    return [c for c in parse_codings(response.headers.get("transfer-encoding")) if c != "chunked"]


def client_pairs(ctx: ProxyContext, client_id: str) -> Mapping[bytes, bytes] | None:
    """A client connection's scrub map, or None when it needs none (also what
    :mod:`airlock.proxy.mitm` scrubs WebSocket control frames and 103s with)."""
    state = ctx.connections.get(client_id)
    if state is None:
        return None
    if (state.tunnel is not None and state.tunnel.intercept) or state.scrub:
        return state.scrub
    return None


class Scrub:
    def __init__(self, ctx: ProxyContext) -> None:
        self.ctx = ctx

    def _pairs(self, flow: http.HTTPFlow) -> Mapping[bytes, bytes] | None:
        """The live scrub map for this flow, or None when it needs none.

        Every flow inside an intercepted tunnel gets the (live, possibly still
        empty) map: a token swapped later on the same connection (another
        HTTP/2 stream) is scrubbed from this response too.
        """
        if REFUSED in flow.metadata:
            return None
        return client_pairs(self.ctx, flow.client_conn.id)

    def _replace(self, flow: http.HTTPFlow, status: int, reason: str, message: str) -> None:
        """Answer with airlock's own error instead of upstream's response."""
        self.ctx.refuse(flow, status, reason, message)
        assert flow.response is not None
        flow.response.headers["connection"] = "close"

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        """No WebSocket extension on intercepted tunnels: compression hides frames."""
        if self._pairs(flow) is not None and "sec-websocket-extensions" in flow.request.headers:
            del flow.request.headers["sec-websocket-extensions"]

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        pairs = self._pairs(flow)
        response = flow.response
        if pairs is None or response is None:
            return
        reason = scrub(response.data.reason, pairs)
        if reason != response.data.reason:
            response.reason = status_codes.RESPONSES.get(response.status_code, "")
        fields = _scrub_fields(response.headers.fields, pairs)
        if fields is not None:
            response.headers.fields = fields
        try:
            size = expected_http_body_size(flow.request, response)
        except ValueError:
            size = None
        if size == 0:
            response.stream = _drop  # no body: HTTP/2 DATA frames for it go nowhere
            return
        codings = parse_codings(response.headers.get("content-encoding"))
        codings += _transfer_codings(response)
        if not codings and size is not None and 0 < size <= _buffer_limit():
            response.stream = False  # buffered; scrubbed whole in response()
            return
        if not supported(codings):
            self._replace(
                flow,
                502,
                "unscrubbable_response",
                "the upstream answered in a content encoding airlock cannot inspect; "
                "send Accept-Encoding: gzip, br, zstd or identity",
            )
            assert flow.response is not None
            self._stream(flow, _Swallow(flow.response.content or b""))
            return
        config = self.ctx.config
        budget = DecodeBudget(config.max_decoded_bytes, config.max_decode_ratio)
        decoder = ChainDecoder(codings, budget) if codings else None
        self._stream(flow, _Aborting(StreamScrubber(pairs, decoder), flow, self.ctx))
        if codings:
            response.headers.pop("content-encoding", None)

    def _stream(self, flow: http.HTTPFlow, stream: _Swallow | _Aborting) -> None:
        """Stream the body; replacements change its length, so frame it anew."""
        response = flow.response
        assert response is not None
        response.stream = stream
        response.headers.pop("content-length", None)
        response.headers.pop("transfer-encoding", None)
        if flow.client_conn.alpn == b"h2" or flow.request.http_version == "HTTP/1.0":
            return  # HTTP/2 frames it; an HTTP/1.0 client reads until close.
        response.http_version = "HTTP/1.1"
        response.headers["transfer-encoding"] = "chunked"

    def response(self, flow: http.HTTPFlow) -> None:
        response = flow.response
        if response is None:
            return
        if REFUSED in flow.metadata:
            # Our own answer: nothing of upstream's (e.g. its trailers) rides along.
            response.trailers = None
            return
        if response.trailers and flow.client_conn.alpn != b"h2":
            # mitmproxy cannot write HTTP/1 trailers (the response would never
            # end): an HTTP/2 upstream's trailers are dropped for an HTTP/1 client.
            response.trailers = None
        if response.status_code == 101 and flow.websocket is None:
            self._replace(
                flow,
                502,
                "upgrade_refused",
                "only WebSocket upgrades are relayed; use plain HTTP requests or a WebSocket",
            )
            return
        pairs = self._pairs(flow)
        if pairs is None:
            return
        if response.trailers:
            fields = _scrub_fields(response.trailers.fields, pairs)
            if fields is not None:
                response.trailers.fields = fields
        if response.stream:
            return  # already scrubbed chunk by chunk
        if response.raw_content is None:
            return
        try:
            content = response.get_content(strict=True)
        except ValueError:
            self._replace(
                flow,
                502,
                "unscrubbable_response",
                "the upstream response could not be decoded for scrubbing; retry the request",
            )
            return
        if content is None:
            return
        scrubbed = scrub(content, pairs)
        if scrubbed != content:
            response.set_content(scrubbed)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        """Server-to-client WebSocket messages are scrubbed too."""
        pairs = self._pairs(flow)
        if not pairs or flow.websocket is None or not flow.websocket.messages:
            return
        message = flow.websocket.messages[-1]
        if message.from_client:
            return
        scrubbed = scrub(message.content, pairs)
        if scrubbed != message.content:
            message.content = scrubbed
