"""The few places airlock reaches into mitmproxy 11.0's internals, in one module.

mitmproxy offers no option for what a credential broker needs at the
connection level, so these are done here and nowhere else (and pinned to
mitmproxy 11.0.x by ``pyproject.toml``):

- **Ending a client connection** from outside its hooks (a deleted session, a
  head timeout): cancel the task mitmproxy reads that client with, exactly as
  its own inactivity watchdog does (``ConnectionHandler.on_timeout``).
- **Counting bytes** each way on the client socket, for ``tunnel_close``:
  passthrough tunnels have no flow and no hook per chunk, so the client's
  stream reader and writer are wrapped when the client connects.
- **The request head limit and timeout.** mitmproxy's HTTP/1 server buffers a
  request head without bound ("FIXME: protect against header size DoS" in
  ``_http1.py``) and only has a 600 s inactivity timeout. A guard around
  ``Http1Server._handle_event`` answers 431 and closes once the buffered head
  passes ``max_bytes`` (dropping the buffer at once, so the memory goes), and
  closes a connection whose head is not complete ``timeout_s`` after it
  started. HTTP/2 heads are bounded by h2/hpack's own 64 KiB
  ``max_header_list_size``.
- **The idle timeout**: ``mitmproxy.proxy.server.TCP_TIMEOUT`` is read when a
  connection starts; we set it from ``--idle-timeout``.
- **Fair reads and the HTTP/2 meter** (floods): a client's reads are capped and
  held while its connection or session is over budget, and every HTTP/2 event
  a client causes is reported before mitmproxy acts on it (see the section at
  the end; the budgets are :mod:`airlock.proxy.addons.limits`).
- **The stream guard** (:mod:`airlock.proxy.guard`): ``ClientTLSLayer.send_data``
  is the one place every plaintext byte towards the sandbox passes on an
  intercepted tunnel, after every hook and every mitmproxy code path, just
  before TLS encrypts it. It is wrapped so the bytes go through the
  connection's :class:`~airlock.proxy.guard.ResponseGuard` first; on a
  violation nothing more is encrypted, the client connection is closed at
  once and the guard's ``on_violation`` is told. The guard learns the request
  methods (answers to ``HEAD`` have no body) from the request heads
  ``Http1Server`` parses, in order.
- **HTTP/1.1 towards the sandbox**: :func:`select_http1` is the ALPN callback of
  the certificate mitmproxy presents to the sandbox: it only ever selects
  ``http/1.1`` (the upstream side still negotiates HTTP/2 when it can), so
  the guard parses one framing.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import weakref
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any

import h2.events
from h2.stream import StreamClosedBy
from h11._receivebuffer import ReceiveBuffer
from mitmproxy.proxy import commands, events, layer
from mitmproxy.proxy import server as mitm_server
from mitmproxy.proxy.layers import tls as tls_layers
from mitmproxy.proxy.layers.http import HttpStream, _http1, _http2
from mitmproxy.proxy.layers.http._base import ReceiveHttp
from mitmproxy.proxy.layers.http._events import (
    RequestData,
    RequestEndOfMessage,
    RequestHeaders,
    RequestTrailers,
)
from mitmproxy.proxy.layers.http._hooks import HttpRequestHook, HttpResponseHeadersHook
from OpenSSL import SSL

from .guard import GuardViolation, ResponseGuard
from .protocol import error_json

log = logging.getLogger("airlock.proxy.mitm")

_TIMER = "_airlock_head_timer"
_HEAD_END = re.compile(rb"\r?\n\r?\n")


def kill_client(master: Any, client_id: str, reason: str, _tries: int = 40) -> bool:
    """End one client connection (and the server connections it relays)."""
    proxyserver = master.addons.get("proxyserver")
    handler = proxyserver.connections.get(client_id) if proxyserver is not None else None
    if handler is None:
        return False
    io = handler.transports.get(handler.client)
    if io is None or io.handler is None:
        # Still in client_connected: mitmproxy closes a client with an error.
        handler.client.error = f"airlock: {reason}"
        # ... unless it is already past that check and its reader has not
        # started yet (many connections accepted at once): look again soon.
        if _tries > 0:
            asyncio.get_running_loop().call_later(
                0.05, kill_client, master, client_id, reason, _tries - 1
            )
        return True
    io.handler.cancel(f"airlock: {reason}")
    if io.writer is not None:
        # A reader task cancelled before its first step never runs the code
        # that closes the socket (many connections accepted at once): close it.
        io.writer.close()
    return True


class _CountingReader:
    def __init__(self, inner: Any, on_bytes: Callable[[int], None]) -> None:
        self._inner = inner
        self._on_bytes = on_bytes

    async def read(self, n: int = -1) -> bytes:
        data: bytes = await self._inner.read(n)
        if data:
            self._on_bytes(len(data))
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _CountingWriter:
    def __init__(self, inner: Any, on_bytes: Callable[[int], None]) -> None:
        self._inner = inner
        self._on_bytes = on_bytes

    def write(self, data: bytes) -> None:
        self._on_bytes(len(data))
        self._inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def count_client_bytes(
    master: Any, client_id: str, up: Callable[[int], None], down: Callable[[int], None]
) -> bool:
    """Wrap a just-connected client's reader/writer so every byte is counted."""
    proxyserver = master.addons.get("proxyserver")
    handler = proxyserver.connections.get(client_id) if proxyserver is not None else None
    if handler is None:
        return False
    io = handler.transports.get(handler.client)
    if io is None or io.reader is None or io.writer is None:
        return False
    io.reader = _CountingReader(io.reader, up)
    io.writer = _CountingWriter(io.writer, down)
    return True


def set_idle_timeout(seconds: float) -> None:
    mitm_server.TCP_TIMEOUT = max(1, round(seconds))


@dataclass
class HeadGuard:
    """What the HTTP/1 head guard enforces, and whom it tells."""

    max_bytes: int
    timeout_s: float
    on_too_large: Callable[[str], None]  # client id
    on_timeout: Callable[[str], None]  # client id: must end the connection


_guard: HeadGuard | None = None
_original: Callable[..., Any] | None = None


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
    assert _original is not None
    if _stream_guard is not None and self.context.client.tls:
        yield from _telling_methods(self, event)
        return
    yield from _head_guarded(self, event)


def _head_guarded(self: Any, event: events.Event) -> Generator[Any, Any, None]:
    assert _original is not None
    guard = _guard
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


def install_head_guard(guard: HeadGuard) -> None:
    """Enforce ``guard`` on every HTTP/1 request head mitmproxy reads (idempotent)."""
    global _guard, _original
    _guard = guard
    if _original is None:
        _original = _http1.Http1Server._handle_event
        _http1.Http1Server._handle_event = _guarded  # type: ignore[method-assign]


def uninstall_head_guard() -> None:
    global _guard
    _guard = None


# -- Holding a request body until a scope gate decides -------------------------
#
# A lease scope that needs the start of a body (a GraphQL document, a git
# push's command list) must decide before anything goes upstream: mitmproxy
# sends a streamed request's headers the moment streaming starts. With a gate
# in ``flow.metadata[BODY_GATE]`` (set by the swap concern in
# ``requestheaders``, together with ``flow.request.stream = True``),
# ``HttpStream.start_request_stream`` instead holds the body and feeds the
# gate; when it says yes the upstream connection opens and the held bytes go
# first, then the rest streams on as before; when it says no, ``flow.response``
# (set by the gate's caller) is answered once the client has finished sending,
# and the held and later bytes are dropped. Memory is bounded by the gate's
# bound (64 KiB for a push, 1 MiB for GraphQL).

BODY_GATE = "airlock_body_gate"
# (data, end) -> True: forward, False: refused (flow.response set), None: more.
BodyGateFn = Callable[[bytes, bool], "bool | None"]

_original_start: Callable[..., Any] | None = None


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
    assert _original_start is not None
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


def install_body_gate() -> None:
    """Make ``start_request_stream`` honour :data:`BODY_GATE` (idempotent, process-wide)."""
    global _original_start
    if _original_start is None:
        _original_start = HttpStream.start_request_stream
        HttpStream.start_request_stream = _gated_start  # type: ignore[method-assign]


# --- Fair reads and HTTP/2 metering (the policy is in addons/limits.py) ------
#
# mitmproxy reads a client 64 KiB at a time and hands all of it to its layers
# at once, without a turn of the event loop while data is buffered; HTTP/2
# parsing of 64 KiB of rapid-reset frames alone takes a quarter of a second.
# A client's reads are therefore as large as ``chunk()`` says (small until the
# connection is known not to speak HTTP/2), a full one is followed by a turn
# of the loop, and they are held while ``gate`` says the connection or its
# session is over budget.
# The HTTP/2 meter reports each frame event a client causes *before*
# mitmproxy acts on it, so streams and resets are counted as they are parsed.


class _GatedReader:
    def __init__(
        self, inner: Any, gate: Callable[[], Awaitable[None]], chunk: Callable[[], int]
    ) -> None:
        self._inner = inner
        self._gate = gate
        self._chunk = chunk

    async def read(self, n: int = -1) -> bytes:
        await self._gate()
        size = self._chunk()
        want = size if n < 0 else min(n, size)
        data: bytes = await self._inner.read(want)
        if data:
            if len(data) >= want:
                # More may be buffered, and reading it would not yield: let the
                # other connections have their turn first.
                await asyncio.sleep(0)
            # Data that arrived while over budget waits too. Nothing yields
            # between this check and mitmproxy handling (and charging) the data,
            # so the session's other connections see the charge at once.
            await self._gate()
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def gate_client_reads(
    master: Any, client_id: str, gate: Callable[[], Awaitable[None]], chunk: Callable[[], int]
) -> bool:
    """Read a just-connected client at most ``chunk()`` bytes at a time, after ``gate``."""
    proxyserver = master.addons.get("proxyserver")
    handler = proxyserver.connections.get(client_id) if proxyserver is not None else None
    if handler is None:
        return False
    io = handler.transports.get(handler.client)
    if io is None or io.reader is None:
        return False
    io.reader = _GatedReader(io.reader, gate, chunk)
    return True


H2Meter = Callable[[str, str, int], None]  # (client id, "stream"|"reset"|"data"|"frame", size)
_h2_meter: H2Meter | None = None
_h2_original: Callable[..., Any] | None = None


def _metered_h2_event(self: Any, event: Any) -> Generator[Any, Any, bool]:
    assert _h2_original is not None
    meter = _h2_meter
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
    result: bool = yield from _h2_original(self, event)
    return result


def _reset_by_client(conn: Any, stream_id: int) -> bool:
    closed_by = conn._stream_closed_by(stream_id)
    return bool(closed_by == StreamClosedBy.RECV_RST_STREAM)


def install_h2_meter(meter: H2Meter) -> None:
    """Call ``meter`` for every HTTP/2 event a client connection causes (idempotent)."""
    global _h2_meter, _h2_original
    _h2_meter = meter
    if _h2_original is None:
        _h2_original = _http2.Http2Server.handle_h2_event
        _http2.Http2Server.handle_h2_event = _metered_h2_event  # type: ignore[method-assign]


def uninstall_h2_meter() -> None:
    global _h2_meter
    _h2_meter = None


# --- the stream guard ---------------------------------------------------------------


@dataclass
class StreamGuard:
    """Whose guard checks a tunnel's bytes, and whom a violation is told."""

    make: Callable[[str], ResponseGuard]  # client id -> its guard
    on_violation: Callable[[str, GuardViolation], None]  # must end the connection


_stream_guard: StreamGuard | None = None
_original_send_data = tls_layers.ClientTLSLayer.send_data
_GUARDS: weakref.WeakValueDictionary[str, ResponseGuard] = weakref.WeakValueDictionary()
_GUARD_ATTR = "_airlock_stream_guard"


def _guard_of(holder: Any, client_id: str) -> ResponseGuard | None:
    """The client's guard (one per client connection), kept alive by ``holder``."""
    if _stream_guard is None:
        return None
    guard = getattr(holder, _GUARD_ATTR, None) or _GUARDS.get(client_id)
    if guard is None:
        guard = _stream_guard.make(client_id)
        _GUARDS[client_id] = guard
    setattr(holder, _GUARD_ATTR, guard)
    return guard


def _telling_methods(self: Any, event: events.Event) -> Generator[Any, Any, None]:
    """Run the HTTP/1 server as usual, telling the guard each request's method."""
    guard = _guard_of(self, self.context.client.id)
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


def _guarded_send_data(self: Any, data: bytes) -> layer.CommandGenerator[None]:
    """``ClientTLSLayer.send_data``: plaintext for the sandbox passes the guard first."""
    guard = _guard_of(self, self.conn.id) if self.conn is self.context.client else None
    if guard is None:
        yield from _original_send_data(self, data)
        return
    first = guard.violation is None
    try:
        data = guard.send(data)
    except GuardViolation as exc:
        if first:
            assert _stream_guard is not None
            _stream_guard.on_violation(self.conn.id, exc)
            yield commands.CloseConnection(self.conn)
        return
    if data:
        yield from _original_send_data(self, data)


def select_http1(conn: SSL.Connection, options: list[bytes]) -> Any:
    """ALPN towards the sandbox: ``http/1.1`` or nothing (HTTP/1.1 all the same)."""
    return b"http/1.1" if b"http/1.1" in options else SSL.NO_OVERLAPPING_PROTOCOLS


def install_stream_guard(guard: StreamGuard) -> None:
    """Put ``guard`` on every intercepted tunnel's bytes to the sandbox (idempotent).

    Needs :func:`install_head_guard` (the request methods come through it).
    """
    global _stream_guard
    _stream_guard = guard
    tls_layers.ClientTLSLayer.send_data = _guarded_send_data  # type: ignore[method-assign]


def uninstall_stream_guard() -> None:
    global _stream_guard
    _stream_guard = None
    tls_layers.ClientTLSLayer.send_data = _original_send_data  # type: ignore[method-assign]
