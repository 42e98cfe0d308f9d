"""The HTTP/1 request head limit and timeout, and the request methods the stream guard learns.

mitmproxy's HTTP/1 server buffers a request head without bound ("FIXME:
protect against header size DoS" in ``_http1.py``) and only has a 600 s
inactivity timeout. A guard around ``Http1Server._handle_event`` answers 431
and closes once the buffered head passes ``max_bytes`` (dropping the buffer at
once, so the memory goes), and closes a connection whose head is not complete
``timeout_s`` after it started. HTTP/2 heads are bounded by h2/hpack's own
64 KiB ``max_header_list_size``.

On a TLS client connection with the stream guard installed
(:mod:`airlock.proxy.mitm.guard_layer`) the same wrapper tells the
connection's guard each request's method, in order (answers to ``HEAD`` have
no body).
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from h11._receivebuffer import ReceiveBuffer
from mitmproxy.proxy import commands, events
from mitmproxy.proxy.layers.http import _http1
from mitmproxy.proxy.layers.http._base import ReceiveHttp
from mitmproxy.proxy.layers.http._events import RequestHeaders, ResponseData

from ..protocol import error_json
from . import guard_layer
from .patching import Setting, replace

_TIMER = "_airlock_head_timer"
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_original = _http1.Http1Server._handle_event


@dataclass
class HeadGuard:
    """What the HTTP/1 head guard enforces, and whom it tells."""

    max_bytes: int
    timeout_s: float
    on_too_large: Callable[[str], None]  # client id
    on_timeout: Callable[[str], None]  # client id: must end the connection


_guard: Setting[HeadGuard] = Setting()


def _error_response(status: int, reason: str, code: str, message: str) -> bytes:
    body = error_json(code, message)
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "content-type: application/json\r\n"
        f"x-airlock-refusal: {code}\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


def _cancel_timer(layer: Any) -> None:
    handle = getattr(layer, _TIMER, None)
    if handle is not None:
        handle.cancel()
        setattr(layer, _TIMER, None)


def _start_timer(layer: Any, guard: HeadGuard) -> None:
    client_id = layer.context.client.id
    ref = weakref.ref(layer)
    holder: list[asyncio.TimerHandle] = []

    def fire() -> None:
        current = ref()
        if current is None or getattr(current, _TIMER, None) is not holder[0]:
            return
        setattr(current, _TIMER, None)
        if current.state == current.read_headers:
            guard.on_timeout(client_id)

    holder.append(asyncio.get_running_loop().call_later(guard.timeout_s, fire))
    setattr(layer, _TIMER, holder[0])


def _head_too_large(layer: Any, event: events.Event, limit: int) -> bool:
    """Would this data make the head being read (or pipelined) exceed ``limit``?"""
    if not isinstance(event, events.DataReceived):
        return False
    reading = layer.state == layer.read_headers
    if not (reading or layer.state == layer.wait):
        return False
    pending = len(layer.buf) + len(event.data)
    if pending <= limit:
        return False
    if not reading:  # pipelined bytes while a request is in flight
        return True
    # A whole head may arrive in one read (TLS records): its end must lie
    # within the limit.
    window = (bytes(layer.buf) + event.data)[: limit + 4]
    return _HEAD_END.search(window) is None


def _guarded(self: Any, event: events.Event) -> Generator[Any, Any, None]:
    if type(event) is ResponseData:
        # A piece of a response body on its way out (the hot path of a
        # download): it only becomes a SendData; no request head is read, and
        # the head timer was settled when the request was.
        yield from _original(self, event)
        return
    if guard_layer.active() and self.context.client.tls:
        yield from _telling_methods(self, event)
        return
    yield from _head_guarded(self, event)


def _head_guarded(self: Any, event: events.Event) -> Generator[Any, Any, None]:
    guard = _guard.value
    if guard is not None and _head_too_large(self, event, guard.max_bytes):
        _cancel_timer(self)
        self.buf = ReceiveBuffer()  # let the memory go now, not at close
        self.state = self.done
        yield commands.SendData(
            self.conn,
            _error_response(
                431,
                "Request Header Fields Too Large",
                "header_too_large",
                f"the request head exceeds {guard.max_bytes} bytes; send smaller headers",
            ),
        )
        yield commands.CloseConnection(self.conn)
        guard.on_too_large(self.context.client.id)
        return
    yield from _original(self, event)
    if guard is None:
        return
    if isinstance(event, events.ConnectionClosed):
        _cancel_timer(self)
        return
    if self.state == self.read_headers:
        started = bool(self.buf) or isinstance(event, events.Start)
        if started and getattr(self, _TIMER, None) is None:
            _start_timer(self, guard)
    else:
        _cancel_timer(self)


def _telling_methods(self: Any, event: events.Event) -> Generator[Any, Any, None]:
    """Run the HTTP/1 server as usual, telling the guard each request's method."""
    guard = guard_layer.guard_of(self, self.context.client.id)
    inner = _head_guarded(self, event)
    reply = None
    while True:
        try:
            command = inner.send(reply)
        except StopIteration:
            return
        if (
            guard is not None
            and isinstance(command, ReceiveHttp)
            and isinstance(command.event, RequestHeaders)
        ):
            guard.request(command.event.request.method)
        reply = yield command


def install(guard: HeadGuard) -> None:
    """Enforce ``guard`` on every HTTP/1 request head mitmproxy reads."""
    _guard.value = guard
    replace(_http1.Http1Server, "_handle_event", _guarded)
