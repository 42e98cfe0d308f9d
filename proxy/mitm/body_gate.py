"""Holding a request body until a scope gate decides.

A lease scope that needs the start of a body (a GraphQL document, a git push's
command list) must decide before anything goes upstream: mitmproxy sends a
streamed request's headers the moment streaming starts. With a gate in
``flow.metadata[BODY_GATE]`` (set by the swap concern in ``requestheaders``,
together with ``flow.request.stream = True``),
``HttpStream.start_request_stream`` instead holds the body and feeds the gate;
when it says yes the upstream connection opens and the held bytes go first,
then the rest streams on as before; when it says no, ``flow.response`` (set by
the gate's caller) is answered once the client has finished sending, and the
held and later bytes are dropped. Memory is bounded by the gate's bound
(64 KiB for a push, 1 MiB for GraphQL).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from typing import Any

from mitmproxy.proxy import events
from mitmproxy.proxy.layers.http import HttpStream
from mitmproxy.proxy.layers.http._events import RequestData, RequestEndOfMessage, RequestTrailers
from mitmproxy.proxy.layers.http._hooks import HttpRequestHook, HttpResponseHeadersHook

from .patching import replace

BODY_GATE = "airlock_body_gate"
# (data, end) -> True: forward, False: refused (flow.response set), None: more.
BodyGateFn = Callable[[bytes, bool], "bool | None"]

_original_start = HttpStream.start_request_stream


def _finish_refused(stream: Any) -> Generator[Any, Any, None]:
    stream.flow.request.timestamp_end = time.time()
    stream.client_state = stream.state_done
    yield HttpRequestHook(stream.flow)
    if (yield from stream.check_killed(True)):
        return
    stream.flow.response.timestamp_start = time.time()
    yield HttpResponseHeadersHook(stream.flow)
    if (yield from stream.check_killed(True)):
        return
    yield from stream.send_response()


def _gated_start(self: Any) -> Generator[Any, Any, None]:
    gate: BodyGateFn | None = self.flow.metadata.pop(BODY_GATE, None)
    if gate is None:
        yield from _original_start(self)
        return
    held = bytearray()

    def discard(event: events.Event) -> Generator[Any, Any, None]:
        if isinstance(event, RequestEndOfMessage):
            yield from _finish_refused(self)

    def hold(event: events.Event) -> Generator[Any, Any, None]:
        if isinstance(event, RequestTrailers):
            self.flow.request.trailers = event.trailers
            return
        end = isinstance(event, RequestEndOfMessage)
        data = event.data if isinstance(event, RequestData) else b""
        held.extend(data)
        decision = gate(data, end)
        if decision is None:
            return
        if decision is False:
            held.clear()
            self.client_state = discard
            if end:
                yield from _finish_refused(self)
            return
        yield from _original_start(self)
        if self.client_state != self.state_stream_request_body:
            return  # the upstream connection failed; mitmproxy answered
        if held:
            yield from self.state_stream_request_body(RequestData(self.stream_id, bytes(held)))
            held.clear()
        if end:
            yield from self.state_stream_request_body(event)

    self.client_state = hold
    return
    yield  # a generator, like the method it replaces


def install() -> None:
    """Make ``start_request_stream`` honour :data:`BODY_GATE`."""
    replace(HttpStream, "start_request_stream", _gated_start)
