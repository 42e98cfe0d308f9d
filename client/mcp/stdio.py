"""An event-loop-native stdio transport for the SDK's server (pipes and sockets).

The SDK's ``stdio_server`` reads and writes stdin/stdout through worker threads
(one hop to read each line, two to write and flush each answer): on a busy
machine those hops cost more than the tool call itself. When stdin and stdout
are pipes or sockets (how every MCP host starts a server) this reads and writes
them on the event loop instead, with the same framing (one JSON-RPC message a
line, UTF-8); otherwise (a terminal, a file) it falls back to the SDK's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp import types
from mcp.shared.message import SessionMessage

MAX_LINE_BYTES = 64 * 1024 * 1024  # a 500 000-character patch, JSON-escaped, fits


def _is_pipe_or_socket(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """``(read_stream, write_stream)`` for ``Server.run`` over this process's stdin/stdout."""
    if not (_is_pipe_or_socket(0) and _is_pipe_or_socket(1)):
        from mcp.server.stdio import stdio_server

        async with stdio_server() as streams:
            yield streams
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(os.dup(0), "rb", buffering=0)
    )
    write_transport, write_protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(os.dup(1), "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)

    async def pump_in() -> None:
        async with read_in:
            while line := await reader.readline():
                if not line.strip():
                    continue
                try:
                    message = types.JSONRPCMessage.model_validate_json(line)
                except Exception as exc:  # the SDK answers a parse error to the client
                    await read_in.send(exc)
                    continue
                await read_in.send(SessionMessage(message))

    async def pump_out() -> None:
        async with write_out:
            async for item in write_out:
                data = item.message.model_dump_json(by_alias=True, exclude_none=True)
                writer.write(data.encode() + b"\n")
                await writer.drain()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_in)
            tg.start_soon(pump_out)
            yield read_out, write_in
            tg.cancel_scope.cancel()
    finally:
        read_transport.close()
        write_transport.close()
