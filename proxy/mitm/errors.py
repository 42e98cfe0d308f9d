"""airlock's own error pages in place of mitmproxy's.

mitmproxy answers protocol errors itself (a malformed upstream response, an
upstream that cannot be reached, a request it cannot parse) with an HTML page
that quotes the error message, and those messages quote the offending bytes:
``Bad HTTP response line: b'HTTP/1.1 200 <upstream bytes>'``. An upstream that
reflects a swapped header into a broken response would hand the real token to
the sandbox through that page.

:func:`install` replaces the two renderers mitmproxy uses (HTTP/1 and HTTP/2)
with one that answers airlock's JSON error envelope, chosen by the status code
and, for a 502, a few marker words in mitmproxy's message (certificate, TLS,
connect...), so the sandbox still learns what to fix. The message itself is
never sent. For HTTP/2 clients the server side class is replaced too
(:class:`Http2Server`), so the headers are airlock's as well.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import mitmproxy.proxy.layers.http as http_layers
from mitmproxy import http
from mitmproxy.net.http import http1, status_codes
from mitmproxy.proxy import commands, events
from mitmproxy.proxy.layers.http import _base, _http1, _http2
from mitmproxy.proxy.layers.http._events import ResponseProtocolError

from ..protocol import error_json
from .patching import replace

# status -> (error code, message saying what to do next)
_ERRORS: dict[int, tuple[str, str]] = {
    400: ("bad_request", "the proxy could not parse the request; send well-formed HTTP"),
    407: ("proxy_auth_required", "proxy credentials required"),
    408: ("request_timeout", "the request was not received in time; send it again"),
    413: ("body_too_large", "the body is larger than the proxy accepts; send a smaller one"),
    431: ("headers_too_large", "the request head is too large; send fewer or smaller headers"),
    502: (
        "upstream_error",
        "the upstream's answer could not be relayed (unreachable, refused or malformed); "
        "retry, and check the host is reachable",
    ),
    504: ("upstream_timeout", "the upstream did not answer in time; retry later"),
}
_FALLBACK = ("proxy_error", "the proxy could not complete the request; retry")

# A 502's cause, told apart by marker words in mitmproxy's message (first match
# wins). Only this fixed text is ever sent; the message itself never is. Parse
# errors come first: their messages quote upstream bytes, which might contain
# any of the later markers.
_UPSTREAM_CAUSES: tuple[tuple[tuple[str, ...], tuple[str, str]], ...] = (
    (("parse", "bad http", "protocol error", "invalid", "malformed", "unexpected"), _ERRORS[502]),
    (
        ("certificate",),
        (
            "upstream_tls_error",
            "the upstream's TLS certificate could not be verified; the host may be "
            "impersonated, or its CA must be added with --upstream-ca",
        ),
    ),
    (
        ("tls", "ssl", "handshake"),
        ("upstream_tls_error", "TLS with the upstream failed; check the host speaks https"),
    ),
    (
        ("connect", "refused", "unreachable", "resolve", "timed out", "timeout"),
        ("upstream_unreachable", "the upstream could not be reached; retry later"),
    ),
)


def classify(status_code: int, message: str = "") -> tuple[str, str]:
    """(code, message) for an error page: from the status and marker words only."""
    if status_code == 502:
        lowered = message.lower()
        for markers, answer in _UPSTREAM_CAUSES:
            if any(m in lowered for m in markers):
                return answer
    return _ERRORS.get(status_code, _FALLBACK)


def error_body(status_code: int, message: str = "") -> bytes:
    """The JSON envelope for ``status_code``; never carries ``message`` itself."""
    code, text = classify(status_code, message)
    return error_json(code, text)


def format_error(status_code: int, message: str = "") -> bytes:
    """Drop-in for mitmproxy's ``format_error``: ``message`` is never quoted."""
    return error_body(status_code, message)


def make_error_response(status_code: int, message: str = "") -> bytes:
    """Drop-in for mitmproxy's HTTP/1 ``make_error_response`` (``message`` never quoted)."""
    response = http.Response.make(
        status_code,
        error_body(status_code, message),
        http.Headers(
            Connection="close",
            Content_Type="application/json",
            X_Airlock_Refusal=classify(status_code, message)[0],
        ),
    )
    raw: bytes = http1.assemble_response(response)  # type: ignore[no-untyped-call]
    return raw


class Http2Server(_http2.Http2Server):
    """mitmproxy's HTTP/2 server side, with airlock's error response.

    mitmproxy writes its HTTP/2 error response inline (``server: mitmproxy``,
    ``content-type: text/html``); this answers the same cases with airlock's
    JSON envelope and headers, and leaves every other event to mitmproxy.
    """

    def _handle_event(self, event: events.Event) -> Generator[commands.Command, Any, None]:
        if (
            isinstance(event, ResponseProtocolError)
            and event.code != status_codes.NO_RESPONSE
            and not self.is_closed(event.stream_id)
            and self.is_open_for_us(event.stream_id)
            and not self.h2_conn.streams[event.stream_id].state_machine.headers_sent
        ):
            code, _ = classify(event.code, event.message)
            self.h2_conn.send_headers(
                event.stream_id,
                [
                    (b":status", b"%d" % event.code),
                    (b"content-type", b"application/json"),
                    (b"x-airlock-refusal", code.encode()),
                ],
            )
            self.h2_conn.send_data(
                event.stream_id, error_body(event.code, event.message), end_stream=True
            )
            yield commands.SendData(self.conn, self.h2_conn.data_to_send())
            return
        yield from super()._handle_event(event)


def install() -> None:
    """Point mitmproxy's error renderers at ours (process-wide)."""
    replace(_http1, "make_error_response", make_error_response)
    replace(_http2, "format_error", format_error)
    replace(_base, "format_error", format_error)
    replace(http_layers, "Http2Server", Http2Server)
