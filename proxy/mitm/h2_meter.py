"""The HTTP/2 meter: every HTTP/2 event a client causes, reported before mitmproxy acts.

Streams and resets are counted as they are parsed (the budgets are
:mod:`airlock.proxy.addons.limits`), by wrapping
``Http2Server.handle_h2_event``. A stream whose HEADERS and RST_STREAM came in
the same read (rapid reset) is over before it began: no flow and no hook runs
for it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import h2.events
from h2.stream import StreamClosedBy
from mitmproxy.proxy.layers.http import _http2

from .patching import Setting, replace

H2Meter = Callable[[str, str, int], None]  # (client id, "stream"|"reset"|"data"|"frame", size)

_meter: Setting[H2Meter] = Setting()
_original = _http2.Http2Server.handle_h2_event


def _metered_h2_event(self: Any, event: Any) -> Generator[Any, Any, bool]:
    meter = _meter.value
    if meter is not None:
        size = 0
        if isinstance(event, h2.events.RequestReceived):
            kind = "stream"
        elif isinstance(event, h2.events.StreamReset):
            kind = "reset"
        elif isinstance(event, h2.events.DataReceived):
            kind, size = "data", int(event.flow_controlled_length or 0)
        else:
            kind = "frame"
        meter(self.context.client.id, kind, size)
        if kind == "stream" and _reset_by_client(self.h2_conn, event.stream_id):
            # HEADERS and RST_STREAM arrived in the same read (rapid reset):
            # the stream is over before it began, so no flow and no hook runs
            # for it; mitmproxy ignores the reset of a stream it never saw.
            return False
    result: bool = yield from _original(self, event)
    return result


def _reset_by_client(conn: Any, stream_id: int) -> bool:
    closed_by = conn._stream_closed_by(stream_id)
    return bool(closed_by == StreamClosedBy.RECV_RST_STREAM)


def install(meter: H2Meter) -> None:
    """Call ``meter`` for every HTTP/2 event a client connection causes."""
    _meter.value = meter
    replace(_http2.Http2Server, "handle_h2_event", _metered_h2_event)
