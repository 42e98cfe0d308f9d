"""103 Early Hints relay, in process: what is an interim head and how it is relayed."""

from __future__ import annotations

from mitmproxy import http

from airlock.proxy.mitm.early_hints import _interim_status, render_interim
from airlock.proxy.scrubber import token_forms
from tests.proxy.addons.conftest import PLACEHOLDER, REAL


def test_interim_heads_are_recognised() -> None:
    assert _interim_status(b"HTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\nHTTP/1.1 200") == 103
    assert _interim_status(b"HTTP/1.1 100 Continue\r\n\r\n") == 100
    assert _interim_status(b"HTTP/1.1 101 Switching\r\n\r\n") is None
    assert _interim_status(b"HTTP/1.1 200 OK\r\n\r\n") is None
    assert _interim_status(b"HTTP/1.1 103 Early") is None  # incomplete head


def test_interim_head_is_scrubbed_and_normalised() -> None:
    response = http.Response.make(103, b"", {"link": f"</s.css>; x={REAL}"})
    response.headers.pop("content-length", None)
    response.reason = f"hint {REAL}"
    raw = render_interim(response, token_forms(REAL, PLACEHOLDER))
    assert raw.startswith(b"HTTP/1.1 103 Early Hints\r\n") and raw.endswith(b"\r\n\r\n")
    assert REAL.encode() not in raw and PLACEHOLDER.encode() in raw
