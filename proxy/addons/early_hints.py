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
``Expect: 100-continue`` itself. (mitmproxy drops 1xx from HTTP/2 upstreams.)
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any

from mitmproxy import http
from mitmproxy.net.http import http1
from mitmproxy.proxy import commands, events
from mitmproxy.proxy.layers.http import HttpLayer, _http1, _http2

from airlock.proxy.scrubber import scrub, scrub_name

PairsFor = Callable[[str], Mapping[bytes, bytes] | None]

_pairs_for: PairsFor | None = None
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
    self: _http1.Http1Client, interim: http.Response, pairs: Mapping[bytes, bytes] | None
) -> Generator[commands.Command, Any, None]:
    """Send the 103 to the client over whatever protocol it speaks."""
    client = self.context.client
    layer = next((x for x in reversed(self.context.layers) if isinstance(x, HttpLayer)), None)
    server_side = layer.connections.get(client) if layer is not None else None
    if isinstance(server_side, _http2.Http2Server):
        fields = [
            (scrub_name(n, pairs or {}).lower(), scrub(v, pairs or {}))
            for n, v in interim.headers.fields
            if n.lower() not in _HOP_BY_HOP
        ]
        h2_conn = server_side.h2_conn
        try:
            h2_conn.send_headers(self.stream_id, [(b":status", b"103"), *fields])
        except Exception:  # a hint that cannot be sent is dropped
            return
        yield commands.SendData(client, h2_conn.data_to_send())
    elif (
        isinstance(server_side, _http1.Http1Server)
        and self.request is not None
        and self.request.http_version == "HTTP/1.1"
    ):
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
                client_id = self.context.client.id
                pairs = _pairs_for(client_id) if _pairs_for is not None else None
                yield from _relay(self, interim, pairs)
        if not self.buf:
            return
    yield from _original(self, event)


def install(pairs_for: PairsFor) -> None:
    """Relay 103s with headers scrubbed by ``pairs_for(client_id)`` (process-wide)."""
    global _pairs_for
    _pairs_for = pairs_for
    _http1.Http1Client.read_headers = read_headers  # type: ignore[method-assign,assignment]
