"""A lean thread hop for blocking file work, cheaper than ``asyncio.to_thread``.

Blocking file I/O (``realpath``'s lstats, ``open``, ``read``) must stay off the
event loop. ``asyncio.to_thread`` does that, but each call pays for a copied
context, a ``concurrent.futures.Future`` with its condition variable, the
executor's semaphore and ``wrap_future``'s two-way chaining: about 40 µs per
call on a 2-core machine, which was most of the gap between ``file_read`` and
a bare aiohttp handler. Here a job is one tuple on a ``SimpleQueue``; the
worker hands the result back with a single ``call_soon_threadsafe`` straight
into an asyncio future.

Workers are started on demand up to ``max_workers`` (so one slow read does not
stall the others) and exit after ``idle_seconds`` without work, so a workspace
that is dropped without ``close()`` (in-process tests) leaks no threads for
long.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]


def _settle(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    """Runs on the loop: the awaiting handler may have been cancelled meanwhile."""
    if fut.done():
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


class ThreadHop:
    """Runs blocking callables on a few worker threads and awaits their results."""

    def __init__(self, max_workers: int = 8, idle_seconds: float = 30.0) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._max = max_workers
        self._idle_seconds = idle_seconds
        self._workers = 0
        self._idle = 0
        self._closed = False

    async def run(self, fn: Callable[[], T]) -> T:
        """``await fn()`` on a worker thread; exceptions propagate unchanged."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        with self._lock:
            if self._closed:
                raise RuntimeError("ThreadHop is closed")
            if self._idle > 0:
                self._idle -= 1  # claimed: the next job will not count on this worker
            elif self._workers < self._max:
                self._workers += 1
                threading.Thread(target=self._work, name="airlockd-io", daemon=True).start()
            self._jobs.put((loop, fut, fn))
        return await fut

    def close(self) -> None:
        """Let every worker finish its current job and exit; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for _ in range(self._workers):
                self._jobs.put(None)

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self._idle_seconds)
            except queue.Empty:
                with self._lock:
                    # A submitter may have claimed this worker just before the timeout.
                    if self._idle > 0 and self._jobs.empty():
                        self._idle -= 1
                        self._workers -= 1
                        return
                continue
            if job is None:
                return
            loop, fut, fn = job
            try:
                result: tuple[bool, Any] = (True, fn())
            except BaseException as exc:  # handed to the awaiting coroutine, never lost
                result = (False, exc)
            del fn, job
            # Count as idle before waking the loop: once woken, the loop thread wants the
            # GIL back, and every bytecode run here after the wake-up delays it.
            with self._lock:
                self._idle += 1
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting
                loop.call_soon_threadsafe(_settle, fut, *result)
            del fut, loop, result
