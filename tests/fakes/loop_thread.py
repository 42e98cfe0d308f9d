"""An asyncio loop on a daemon thread: where the threaded fake servers live.

The TLS upstreams (``upstream.EchoUpstream``, ``reflector.Reflector``) serve
from their own loop so that synchronous tests and subprocess proxies can talk
to them; this is the one place that starts such a loop, waits for the server
to be listening, and stops and cleans it up.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import ClassVar, Self


class LoopThread:
    """Runs ``setup`` then the loop until ``stop``; ``teardown`` runs on the loop before it closes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(
        self,
        setup: Callable[[], Awaitable[None]],
        teardown: Callable[[], Awaitable[None]],
    ) -> None:
        """Returns once ``setup`` has finished (the server listens), or raises after 10 s."""
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._loop = loop

        async def first() -> None:
            await setup()
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(first())
            loop.run_forever()
            loop.run_until_complete(teardown())
            loop.close()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{self.name} did not start")

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


class ThreadedServer:
    """Base of the fake servers served from a :class:`LoopThread`: a subclass binds in
    ``_open`` (setting its port) and releases in ``_close``; both run on the loop."""

    server_name: ClassVar[str] = "fake server"
    _loop_thread: LoopThread | None = None

    async def _open(self) -> None:
        raise NotImplementedError

    async def _close(self) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        self._loop_thread = LoopThread(self.server_name)
        self._loop_thread.start(self._open, self._close)
        return self

    def stop(self) -> None:
        if self._loop_thread is not None:
            self._loop_thread.stop()
