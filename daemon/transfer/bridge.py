"""File-like ends of an HTTP body for code that runs on a worker thread (``tarfile``).

``tarfile`` is synchronous; the body is read and the response written on the
event loop. These adapters hop each ``read``/``write`` to the loop and wait for
it, so the thread never holds more than one buffer and the socket's
backpressure reaches the thread: memory stays bounded whatever the size.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from ..errors import InvalidRequest

IDLE_S = 60.0


class BodyReader:
    """``read(n)`` of the request body, from a worker thread."""

    def __init__(self, request: web.Request, loop: asyncio.AbstractEventLoop) -> None:
        self._content = request.content
        self._loop = loop
        self.received = 0
        self.closed = False

    async def _read(self, size: int) -> bytes:
        try:
            async with asyncio.timeout(IDLE_S):
                return await self._content.read(size)
        except TimeoutError:
            raise InvalidRequest(
                f"the upload sent nothing for {IDLE_S:g} s and was abandoned; nothing was "
                "written. Send the body without pauses."
            ) from None

    def read(self, size: int = -1) -> bytes:
        if self.closed:
            raise ConnectionResetError("the request was abandoned")
        size = 1 << 20 if size is None or size < 0 else size
        data = asyncio.run_coroutine_threadsafe(self._read(size), self._loop).result()
        self.received += len(data)
        return data


class ResponseWriter:
    """``write(data)`` into a prepared streaming response, from a worker thread."""

    def __init__(self, response: web.StreamResponse, loop: asyncio.AbstractEventLoop) -> None:
        self._response = response
        self._loop = loop
        self.sent = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        if self.closed:
            raise ConnectionResetError("the client went away")
        chunk = bytes(data)
        asyncio.run_coroutine_threadsafe(self._response.write(chunk), self._loop).result()
        self.sent += len(chunk)
        return len(chunk)

    def flush(self) -> None:
        return None
