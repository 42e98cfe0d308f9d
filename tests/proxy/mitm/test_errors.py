"""airlock's error pages replace mitmproxy's and never quote what they are given."""

from __future__ import annotations

import json

from mitmproxy.proxy.layers.http import _http1, _http2

from airlock.proxy.mitm import errors, patching
from tests.proxy.addons.conftest import REAL


def test_error_pages_never_quote_the_message() -> None:
    message = f"Bad HTTP response line: b'HTTP/1.1 2x0 Bearer {REAL}'"
    raw = errors.make_error_response(502, message)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert REAL.encode() not in raw and b"mitmproxy" not in raw
    assert head.startswith(b"HTTP/1.1 502 ")
    assert b"content-type: application/json" in head.lower()
    assert json.loads(body)["error"]["code"] == "upstream_error"
    assert json.loads(errors.format_error(400, message))["error"]["code"] == "bad_request"
    assert json.loads(errors.format_error(599, message))["error"]["code"] == "proxy_error"


def test_502_causes_are_told_apart_without_quoting() -> None:
    cert = json.loads(errors.format_error(502, f"Certificate verify failed: {REAL}"))["error"]
    assert cert["code"] == "upstream_tls_error" and "certificate" in cert["message"]
    down = json.loads(errors.format_error(502, "Connection refused"))["error"]
    assert down["code"] == "upstream_unreachable"
    # A malformed response quoting "certificate" is still a malformed response.
    bad = errors.format_error(502, f"Bad HTTP response line: b'certificate {REAL}'")
    assert json.loads(bad)["error"]["code"] == "upstream_error" and REAL.encode() not in bad


def test_install_points_mitmproxy_at_airlock_pages() -> None:
    errors.install()
    try:
        assert _http1.make_error_response is errors.make_error_response
        assert _http2.format_error is errors.format_error  # type: ignore[attr-defined]
        assert REAL.encode() not in _http1.make_error_response(502, REAL)
    finally:
        patching.restore_all()
    assert _http1.make_error_response is not errors.make_error_response


def test_http2_server_side_is_airlocks() -> None:
    import mitmproxy.proxy.layers.http as http_layers

    errors.install()
    try:
        assert http_layers.Http2Server is errors.Http2Server  # type: ignore[attr-defined]
    finally:
        patching.restore_all()
    assert http_layers.Http2Server is _http2.Http2Server  # type: ignore[attr-defined]
