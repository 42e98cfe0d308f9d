"""HTTP/1 trailers: dropped, so the response completes instead of hanging.

mitmproxy 11 does not implement HTTP/1 trailers: when a chunked HTTP/1 body
ends with trailer fields its HTTP/1 layer raises ``NotImplementedError``, the
connection's state machine stops, and the client waits for a body that never
ends. :func:`install` wraps mitmproxy's body readers so that a chunked body's
trailer fields are dropped (never relayed, so never a leak) and the message
ends normally. HTTP/2 trailers are unaffected: mitmproxy relays them and
:class:`airlock.proxy.addons.scrub.Scrub` scrubs them.
"""

from __future__ import annotations

from typing import Any

import h11
from mitmproxy.proxy.layers.http import _http1

from .patching import replace

_original = _http1.make_body_reader


def _without_trailers(event: Any) -> Any:
    if isinstance(event, h11.EndOfMessage) and event.headers:
        return h11.EndOfMessage()
    return event


class TrailerDroppingReader:
    """A body reader whose end of message never carries trailer fields."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, buf: Any) -> Any:
        return _without_trailers(self.inner(buf))

    def read_eof(self) -> Any:
        return _without_trailers(self.inner.read_eof())


def make_body_reader(expected_size: int | None) -> TrailerDroppingReader:
    return TrailerDroppingReader(_original(expected_size))


def install() -> None:
    """Drop HTTP/1 trailer fields in every HTTP/1 body mitmproxy reads (process-wide)."""
    replace(_http1, "make_body_reader", make_body_reader)
