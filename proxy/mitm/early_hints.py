"""103 Early Hints from an HTTP/1 upstream: passed on, and the final response follows.

mitmproxy 11's HTTP/1 client takes the first response head it reads for the
final one: a ``103 Early Hints`` becomes the answer and the real ``200`` that
follows is dropped as unexpected data. :func:`install` wraps
``Http1Client.read_headers``: an interim ``103`` head is taken off the buffer,
relayed (headers scrubbed with the connection's scrub map) to the client,
and reading continues with the final response. To an HTTP/1.1 client the head
is written as is; to an HTTP/2 client it is sent as an informational HEADERS
frame on the request's stream, through the client connection's own h2 state
machine (mitmproxy's HTTP events have no interim response). Other interim
answers (``100``, ``102``) are dropped: mitmproxy answers
``Expect: 100-continue`` itself. A ``103`` from an HTTP/2 upstream (which
mitmproxy's HTTP/2 client would swallow) is relayed the same way, from
``Http2Client.handle_h2_event``.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any

import h2.events
from mitmproxy import http
from mitmproxy.net.http import http1
from mitmproxy.proxy import commands, events
from mitmproxy.proxy.context import Context
from mitmproxy.proxy.layers.http import HttpLayer, _http1, _http2

from ..scrubber import scrub, scrub_name
from .patching import Setting, replace
from .upgrade import PairsFor

_pairs_for: Setting[PairsFor] = Setting()
_original = _http1.Http1Client.read_headers


def _interim_status(buf: bytes) -> int | None:
    """The status of a complete 1xx (not 101) head at the start of ``buf``."""
    if b"\r\n\r\n" not in buf:
        return None
    parts = buf.split(b"\r\n", 1)[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        return None
    status = int(parts[1])
    return status if 100 <= status < 200 and status != 101 else None


def render_interim(response: http.Response, pairs: Mapping[bytes, bytes] | None) -> bytes:
    """The 1xx head as relayed: HTTP/1.1, standard reason, scrubbed headers."""
    fields = [
        (scrub_name(n, pairs or {}), scrub(v, pairs or {})) for n, v in response.headers.fields
    ]
    reason = http.status_codes.RESPONSES.get(response.status_code, "Early Hints")  # type: ignore[attr-defined]
    head = [b"HTTP/1.1 %d %s" % (response.status_code, reason.encode())]
    head += [n + b": " + v for n, v in fields]
    return b"\r\n".join(head) + b"\r\n\r\n"


_HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"upgrade", b"te"}


def _relay(
    context: Context,
    stream_id: int | None,
    interim: http.Response,
    http11_client: bool,
) -> Generator[commands.Command, Any, None]:
    """Send the 103 to the client over whatever protocol it speaks."""
    client = context.client
    pairs_for = _pairs_for.value
    pairs = (pairs_for(client.id) if pairs_for is not None else None) or {}
    layer = next((x for x in reversed(context.layers) if isinstance(x, HttpLayer)), None)
    server_side = layer.connections.get(client) if layer is not None else None
    if isinstance(server_side, _http2.Http2Server) and stream_id is not None:
        fields = [
            (scrub_name(n, pairs).lower(), scrub(v, pairs))
            for n, v in interim.headers.fields
            if n.lower() not in _HOP_BY_HOP
        ]
        h2_conn = server_side.h2_conn
        try:
            h2_conn.send_headers(stream_id, [(b":status", b"103"), *fields])
        except Exception:  # a hint that cannot be sent is dropped
            return
        yield commands.SendData(client, h2_conn.data_to_send())
    elif isinstance(server_side, _http1.Http1Server):
        request = server_side.request
        if http11_client or (request is not None and request.http_version == "HTTP/1.1"):
            yield commands.SendData(client, render_interim(interim, pairs))


def read_headers(
    self: _http1.Http1Client, event: events.ConnectionEvent
) -> Generator[commands.Command, Any, None]:
    if isinstance(event, events.DataReceived) and self.request is not None:
        while (status := _interim_status(bytes(self.buf))) is not None:
            lines = self.buf.maybe_extract_lines()
            if not lines:
                break
            try:
                interim = http1.read_response_head([bytes(x) for x in lines])
            except ValueError:
                continue  # an unparseable hint is dropped, never relayed
            if status == 103:
                http11 = self.request.http_version == "HTTP/1.1"
                yield from _relay(self.context, self.stream_id, interim, http11)
        if not self.buf:
            return
    yield from _original(self, event)


_original_h2 = _http2.Http2Client.handle_h2_event


def handle_h2_event(
    self: _http2.Http2Client, event: h2.events.Event
) -> Generator[commands.Command, Any, bool]:
    """An HTTP/2 upstream's 103 (mitmproxy would swallow it) goes to the client too."""
    if isinstance(event, h2.events.InformationalResponseReceived):
        headers = http.Headers([(bytes(k), bytes(v)) for k, v in event.headers])
        if headers.get(":status") == "103":
            interim = http.Response.make(103)
            interim.headers = http.Headers(
                [(k, v) for k, v in headers.fields if not k.startswith(b":")]
            )
            theirs = self.their_stream_id.get(event.stream_id)
            yield from _relay(self.context, theirs, interim, http11_client=False)
            return False
    return (yield from _original_h2(self, event))


def install(pairs_for: PairsFor) -> None:
    """Relay 103s with headers scrubbed by ``pairs_for(client_id)`` (process-wide)."""
    _pairs_for.value = pairs_for
    replace(_http1.Http1Client, "read_headers", read_headers)
    replace(_http2.Http2Client, "handle_h2_event", handle_h2_event)
