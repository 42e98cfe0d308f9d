"""Response scrubbing: a real token never reaches the sandbox.

Every real value swapped on a client connection (and its Basic form) is
remembered for that connection; response headers and buffered bodies are
rewritten back to the placeholder the sandbox sent. Bodies are decoded first
(gzip, br, zstd, deflate), so compression cannot hide a token; a body that
cannot be decoded is withheld (502) rather than passed through unscrubbed.

Large bodies (mitmproxy's ``stream_large_bodies``, e.g. git packs) stay
streamed when they are not content-encoded: a :class:`StreamScrubber` rewrites
them chunk by chunk, holding back just enough bytes that a token split across
chunks is still caught. Encoded large bodies are buffered and scrubbed whole.
"""

from __future__ import annotations

from mitmproxy import http

from airlock.proxy.context import ProxyContext


def _replace(data: bytes, pairs: dict[bytes, bytes]) -> bytes:
    for real, placeholder in pairs.items():
        if real in data:
            data = data.replace(real, placeholder)
    return data


class StreamScrubber:
    """Chunk-wise replacement that never lets a split token through."""

    def __init__(self, pairs: dict[bytes, bytes]) -> None:
        self.pairs = dict(pairs)
        self.keep = max(len(k) for k in self.pairs) - 1
        self.tail = b""

    def __call__(self, chunk: bytes) -> bytes:
        data = _replace(self.tail + chunk, self.pairs)
        if not chunk:  # end of stream
            self.tail = b""
            return data
        if len(data) <= self.keep:
            self.tail = data
            return b""
        cut = len(data) - self.keep
        self.tail = data[cut:]
        return data[:cut]


class Scrub:
    def __init__(self, ctx: ProxyContext) -> None:
        self.ctx = ctx

    def _pairs(self, flow: http.HTTPFlow) -> dict[bytes, bytes]:
        state = self.ctx.connections.get(flow.client_conn.id)
        return state.scrub if state is not None else {}

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        pairs = self._pairs(flow)
        if not pairs or flow.response is None:
            return
        headers = flow.response.headers
        fields = [(name, _replace(value, pairs)) for name, value in headers.fields]
        if fields != list(headers.fields):
            headers.fields = tuple(fields)
        if flow.response.stream:
            encoding = flow.response.headers.get("content-encoding", "identity").lower()
            if encoding in ("", "identity"):
                flow.response.stream = StreamScrubber(pairs)
                # Replacements change the length: frame the body by chunks
                # (HTTP/1 clients) or by the stream's end (HTTP/2).
                flow.response.headers.pop("content-length", None)
                if flow.client_conn.alpn != b"h2":
                    flow.response.headers["transfer-encoding"] = "chunked"
            else:
                flow.response.stream = False

    def response(self, flow: http.HTTPFlow) -> None:
        pairs = self._pairs(flow)
        if not pairs or flow.response is None:
            return
        try:
            content = flow.response.get_content(strict=True)
        except ValueError:
            flow.response = http.Response.make(
                502, b"airlock: response could not be decoded for scrubbing\n"
            )
            self.ctx.metrics.refusals.labels(reason="unscrubbable_response").inc()
            self.ctx.audit.write("refusal", reason="unscrubbable_response", status=502)
            return
        if content is None:
            return
        scrubbed = _replace(content, pairs)
        if scrubbed != content:
            flow.response.set_content(scrubbed)
        if flow.response.trailers:
            trailers = flow.response.trailers
            fields = [(n, _replace(v, pairs)) for n, v in trailers.fields]
            trailers.fields = tuple(fields)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        """Server-to-client WebSocket messages are scrubbed too."""
        pairs = self._pairs(flow)
        if not pairs or flow.websocket is None or not flow.websocket.messages:
            return
        message = flow.websocket.messages[-1]
        if message.from_client:
            return
        scrubbed = _replace(message.content, pairs)
        if scrubbed != message.content:
            message.content = scrubbed
