"""Raw HTTP/1.1 over a Unix socket, for inputs no well-behaved client library would send.

Each helper opens its own connection, writes bytes exactly as given, and reads
the answer until the server closes the connection or the response is complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def envelope(self) -> dict[str, Any]:
        """The JSON error envelope, after checking the content type says JSON."""
        assert self.headers.get("content-type", "").startswith("application/json"), self
        data = json.loads(self.body)
        assert set(data) == {"error"}, data
        assert set(data["error"]) == {"code", "message", "details"}, data
        return data["error"]  # type: ignore[no-any-return]


def parse_response(raw: bytes) -> RawResponse:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = headers.get("content-length")
    if length is not None:
        body = body[: int(length)]
    return RawResponse(status, headers, body)


async def read_response(reader: asyncio.StreamReader, timeout: float = 30.0) -> RawResponse:
    """One response: the head, then Content-Length bytes (or until close)."""
    async with asyncio.timeout(timeout):
        head = await reader.readuntil(b"\r\n\r\n")
        partial = parse_response(head)
        length = partial.headers.get("content-length")
        body = await reader.readexactly(int(length)) if length is not None else await reader.read()
    return RawResponse(partial.status, partial.headers, body)


async def send_raw(socket_path: Path, data: bytes, timeout: float = 30.0) -> RawResponse:
    reader, writer = await asyncio.open_unix_connection(str(socket_path))
    try:
        writer.write(data)
        await writer.drain()
        return await read_response(reader, timeout)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, BrokenPipeError):
            await writer.wait_closed()


def post(route: str, body: bytes, content_type: str = "application/json", extra: str = "") -> bytes:
    """A complete POST request's bytes."""
    return (
        f"POST {route} HTTP/1.1\r\nHost: airlockd\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n{extra}Connection: close\r\n\r\n"
    ).encode() + body


async def closed_by_peer(reader: asyncio.StreamReader, deadline_s: float) -> bool:
    """True when the server closes the connection (EOF or reset) within ``deadline_s``."""
    try:
        async with asyncio.timeout(deadline_s):
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
