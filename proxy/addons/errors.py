"""airlock's own error pages in place of mitmproxy's.

mitmproxy answers protocol errors itself (a malformed upstream response, an
upstream that cannot be reached, a request it cannot parse) with an HTML page
that quotes the error message, and those messages quote the offending bytes:
``Bad HTTP response line: b'HTTP/1.1 200 <upstream bytes>'``. An upstream that
reflects a swapped header into a broken response would hand the real token to
the sandbox through that page.

:func:`install` replaces the two renderers mitmproxy uses (HTTP/1 and HTTP/2)
with one that answers airlock's JSON error envelope chosen by status code
only: the message mitmproxy passes in is never used.
"""

from __future__ import annotations

import json

from mitmproxy import http
from mitmproxy.net.http import http1
from mitmproxy.proxy.layers.http import _base, _http1, _http2

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


def error_body(status_code: int) -> bytes:
    """The JSON envelope for ``status_code``; never carries upstream bytes."""
    code, message = _ERRORS.get(status_code, _FALLBACK)
    return json.dumps({"error": {"code": code, "message": message}}).encode()


def format_error(status_code: int, message: str = "") -> bytes:
    """Drop-in for mitmproxy's ``format_error``: ``message`` is ignored on purpose."""
    return error_body(status_code)


def make_error_response(status_code: int, message: str = "") -> bytes:
    """Drop-in for mitmproxy's HTTP/1 ``make_error_response`` (``message`` ignored)."""
    response = http.Response.make(
        status_code,
        error_body(status_code),
        http.Headers(
            Connection="close",
            Content_Type="application/json",
            X_Airlock_Refusal=_ERRORS.get(status_code, _FALLBACK)[0],
        ),
    )
    raw: bytes = http1.assemble_response(response)  # type: ignore[no-untyped-call]
    return raw


def install() -> None:
    """Point mitmproxy's error renderers at ours (idempotent, process-wide)."""
    _http1.make_error_response = make_error_response  # type: ignore[attr-defined]
    _http2.format_error = format_error  # type: ignore[attr-defined]
    _base.format_error = format_error
