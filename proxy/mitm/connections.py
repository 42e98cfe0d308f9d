"""Reaching a client connection mitmproxy holds: end it, count it, pace its reads.

mitmproxy has no API to act on one client connection from outside its hooks,
so these reach into ``Proxyserver.connections`` (its ``ConnectionHandler`` per
client) and the stream reader and writer it reads and writes the client with:

- **Ending a client connection** (a deleted session, a head timeout): cancel the
  task mitmproxy reads that client with, exactly as its own inactivity watchdog
  does (``ConnectionHandler.on_timeout``).
- **Counting bytes** each way on the client socket, for ``tunnel_close``:
  passthrough tunnels have no flow and no hook per chunk, so the client's
  stream reader and writer are wrapped when the client connects.
- **Fair reads** (floods): mitmproxy reads a client 64 KiB at a time and hands
  all of it to its layers at once, without a turn of the event loop while data
  is buffered; HTTP/2 parsing of 64 KiB of rapid-reset frames alone takes a
  quarter of a second. A client's reads are therefore as large as ``chunk()``
  says (small until the connection is known not to speak HTTP/2), a full one is
  followed by a turn of the loop, and they are held while ``gate`` says the
  connection or its session is over budget (the budgets are
  :mod:`airlock.proxy.addons.limits`).
- **Larger upstream reads**: mitmproxy reads a server 64 KiB at a time and
  runs every read through its whole layer stack and every hook (TLS, HTTP/1,
  the stream scrubber, the guard), a fixed cost per read that dominated a
  streamed download. A server connection's reads take all its stream reader
  holds, up to :data:`SERVER_READ`, so a fast upstream is handled in fewer,
  larger pieces; what the reader buffers before it pauses the socket (and so
  the memory of a stalled tunnel) is unchanged.
- **The idle timeout**: ``mitmproxy.proxy.server.TCP_TIMEOUT`` is read when a
  connection starts; :func:`airlock.proxy.mitm.install` sets it from
  ``--idle-timeout``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from mitmproxy.proxy import server as mitm_server

from .patching import replace


def _client_io(master: Any, client_id: str) -> Any:
    """mitmproxy's stream pair (reader, writer, handler task) for one client, or None."""
    proxyserver = master.addons.get("proxyserver")
    handler = proxyserver.connections.get(client_id) if proxyserver is not None else None
    if handler is None:
        return None
    return handler, handler.transports.get(handler.client)


def kill_client(master: Any, client_id: str, reason: str, _tries: int = 40) -> bool:
    """End one client connection (and the server connections it relays)."""
    found = _client_io(master, client_id)
    if found is None:
        return False
    handler, io = found
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


class _Wrapped:
    """Delegates everything it does not override to the stream it wraps."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _CountingReader(_Wrapped):
    def __init__(self, inner: Any, on_bytes: Callable[[int], None]) -> None:
        super().__init__(inner)
        self._on_bytes = on_bytes

    async def read(self, n: int = -1) -> bytes:
        data: bytes = await self._inner.read(n)
        if data:
            self._on_bytes(len(data))
        return data


class _CountingWriter(_Wrapped):
    def __init__(self, inner: Any, on_bytes: Callable[[int], None]) -> None:
        super().__init__(inner)
        self._on_bytes = on_bytes

    def write(self, data: bytes) -> None:
        self._on_bytes(len(data))
        self._inner.write(data)


def count_client_bytes(
    master: Any, client_id: str, up: Callable[[int], None], down: Callable[[int], None]
) -> bool:
    """Wrap a just-connected client's reader/writer so every byte is counted."""
    found = _client_io(master, client_id)
    io = found[1] if found is not None else None
    if io is None or io.reader is None or io.writer is None:
        return False
    io.reader = _CountingReader(io.reader, up)
    io.writer = _CountingWriter(io.writer, down)
    return True


class _GatedReader(_Wrapped):
    def __init__(
        self, inner: Any, gate: Callable[[], Awaitable[None]], chunk: Callable[[], int]
    ) -> None:
        super().__init__(inner)
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


# Bytes one read of a server connection may return: what its stream reader
# holds when asyncio pauses the socket (past 2 x 64 KiB, left as asyncio sets
# it: a larger buffer saved no CPU and tripled a stalled tunnel's memory).
# 256 KiB reads cost about the same CPU and ~1 MiB more per stalled tunnel.
SERVER_READ = 128 * 1024


class _LargeReader(_Wrapped):
    """A server stream reader read up to :data:`SERVER_READ` bytes at a time."""

    async def read(self, n: int = -1) -> bytes:
        data: bytes = await self._inner.read(SERVER_READ if n >= 0 else n)
        return data


def read_server_larger(reader: Any) -> Any:
    """Wrap a server connection's ``asyncio.StreamReader`` for larger reads."""
    if not isinstance(reader, asyncio.StreamReader):
        return reader  # UDP streams and the like: as they are
    return _LargeReader(reader)


_original_handle_connection = mitm_server.ConnectionHandler.handle_connection


async def _handle_connection(self: Any, connection: Any) -> None:
    """``ConnectionHandler.handle_connection``: server connections read larger."""
    if connection is not self.client:
        io = self.transports.get(connection)
        if io is not None and io.reader is not None:
            io.reader = read_server_larger(io.reader)
    await _original_handle_connection(self, connection)


def install() -> None:
    """Read every server connection :data:`SERVER_READ` bytes at a time."""
    replace(mitm_server.ConnectionHandler, "handle_connection", _handle_connection)


def gate_client_reads(
    master: Any, client_id: str, gate: Callable[[], Awaitable[None]], chunk: Callable[[], int]
) -> bool:
    """Read a just-connected client at most ``chunk()`` bytes at a time, after ``gate``."""
    found = _client_io(master, client_id)
    io = found[1] if found is not None else None
    if io is None or io.reader is None:
        return False
    io.reader = _GatedReader(io.reader, gate, chunk)
    return True
