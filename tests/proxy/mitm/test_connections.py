"""Server connections are read in pieces larger than mitmproxy's 64 KiB; the buffer is not."""

from __future__ import annotations

import asyncio
import socket

from airlock.proxy.mitm import connections
from tests.fakes.wait import wait_until


async def test_a_server_read_returns_more_than_64_kib_and_the_buffer_stays_bounded() -> None:
    """Fewer, larger reads of a fast upstream (each read runs the whole layer stack
    and every hook once); the socket is still paused past asyncio's 2 x 64 KiB."""
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    reader, writer = await asyncio.open_connection(sock=ours)
    wrapped = connections.read_server_larger(reader)
    loop = asyncio.get_running_loop()
    payload = bytes(range(256)) * (6 * connections.SERVER_READ // 256)  # 6 x the read size
    sender = loop.create_task(loop.sock_sendall(theirs, payload))

    def buffered() -> int:
        return len(reader._buffer)  # type: ignore[attr-defined]

    def paused() -> bool:
        return bool(reader._paused)  # type: ignore[attr-defined]

    try:
        # The reader buffers until asyncio pauses the socket (above 2 x 64 KiB).
        await wait_until(paused, message="the stream reader never paused the socket")
        held = buffered()
        assert 128 * 1024 < held <= 128 * 1024 + 256 * 1024  # + at most one recv
        first = await wrapped.read(65535)  # what mitmproxy asks for
        assert len(first) == min(held, connections.SERVER_READ) > 65535
        received = bytearray(first)
        while len(received) < len(payload):
            received += await wrapped.read(65535)
        assert bytes(received) == payload
        await sender
    finally:
        sender.cancel()
        writer.close()
        theirs.close()


async def test_other_streams_are_left_as_they_are() -> None:
    """Anything but an asyncio stream reader (UDP streams) is not wrapped."""
    other = object()
    assert connections.read_server_larger(other) is other
