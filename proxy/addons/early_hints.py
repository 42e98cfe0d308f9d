"""103 Early Hints from an HTTP/1 upstream: passed on, and the final response follows.

mitmproxy 11's HTTP/1 client takes the first response head it reads for the
final one: a ``103 Early Hints`` becomes the answer and the real ``200`` that
follows is dropped as unexpected data. :func:`install` wraps
``Http1Client.read_headers``: an interim ``103`` head is taken off the buffer,
relayed (headers scrubbed with the connection's scrub map) to an HTTP/1.1
client, and reading continues with the final response. Other interim answers
(``100``, ``102``) are dropped: mitmproxy answers ``Expect: 100-continue``
itself. HTTP/2 clients do not get the 103 (mitmproxy has no event for an
interim response on its HTTP/2 server side; it drops them from HTTP/2
upstreams the same way); the final response always follows.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any

from mitmproxy import http
from mitmproxy.net.http import http1
from mitmproxy.proxy import commands, events
from mitmproxy.proxy.layers.http import _http1

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
            client = self.context.client
            if status == 103 and client.alpn != b"h2" and self.request.http_version == "HTTP/1.1":
                pairs = _pairs_for(client.id) if _pairs_for is not None else None
                yield commands.SendData(client, render_interim(interim, pairs))
        if not self.buf:
            return
    yield from _original(self, event)


def install(pairs_for: PairsFor) -> None:
    """Relay 103s with headers scrubbed by ``pairs_for(client_id)`` (process-wide)."""
    global _pairs_for
    _pairs_for = pairs_for
    _http1.Http1Client.read_headers = read_headers  # type: ignore[method-assign,assignment]
