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
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import weakref
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from h11._receivebuffer import ReceiveBuffer
from mitmproxy.proxy import commands, events
from mitmproxy.proxy import server as mitm_server
from mitmproxy.proxy.layers.http import _http1

log = logging.getLogger("airlock.proxy.mitm")

_TIMER = "_airlock_head_timer"
_HEAD_END = re.compile(rb"\r?\n\r?\n")


def kill_client(master: Any, client_id: str, reason: str) -> bool:
    """End one client connection (and the server connections it relays)."""
    proxyserver = master.addons.get("proxyserver")
    handler = proxyserver.connections.get(client_id) if proxyserver is not None else None
    if handler is None:
        return False
    io = handler.transports.get(handler.client)
    if io is None or io.handler is None:
        # Still in client_connected: mitmproxy closes a client with an error.
        handler.client.error = f"airlock: {reason}"
        return True
    io.handler.cancel(f"airlock: {reason}")
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
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
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
