"""A lean thread hop for blocking file work, cheaper than ``asyncio.to_thread``.

Blocking file I/O (``realpath``'s lstats, ``open``, ``read``) must stay off the
event loop. ``asyncio.to_thread`` does that, but each call pays for a copied
context, a ``concurrent.futures.Future`` with its condition variable, the
executor's semaphore and ``wrap_future``'s two-way chaining: about 40 µs per
call on a 2-core machine, which was most of the gap between ``file_read`` and
a bare aiohttp handler. Here a job is one tuple handed to an idle worker
under one lock; the worker hands the result back with a single
``call_soon_threadsafe`` straight into an asyncio future.

Workers are started on demand up to ``max_workers`` (so one slow read does not
stall the others) and exit after ``idle_seconds`` without work, so a workspace
that is dropped without ``close()`` (in-process tests) leaks no threads for
long.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
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


class _Worker:
    """One worker's mailbox: the submitter puts a job here and releases ``wake``."""

    __slots__ = ("job", "wake")

    def __init__(self) -> None:
        self.job: _Job | None = None
        self.wake = threading.Lock()
        self.wake.acquire()


class ThreadHop:
    """Runs blocking callables on a few worker threads and awaits their results.

    Idle workers wait on their own lock and are handed jobs last-in first-out:
    the worker that just finished (caches warm, likely still scheduled) takes
    the next job, and the ones further down the stack time out and exit. A
    shared queue would wake whichever waiter the lock chose, often a cold one.
    """

    def __init__(self, max_workers: int = 8, idle_seconds: float = 30.0) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._backlog: deque[_Job] = deque()
        self._max = max_workers
        self._idle_seconds = idle_seconds
        self._workers = 0
        self._closed = False

    async def run(self, fn: Callable[[], T]) -> T:
        """``await fn()`` on a worker thread; exceptions propagate unchanged."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        job: _Job = (loop, fut, fn)
        with self._lock:
            if self._closed:
                raise RuntimeError("ThreadHop is closed")
            if self._idle:
                worker = self._idle.pop()
                worker.job = job
                worker.wake.release()
            elif self._workers < self._max:
                self._workers += 1
                threading.Thread(
                    target=self._work, args=(job,), name="airlockd-io", daemon=True
                ).start()
            else:
                self._backlog.append(job)
        return await fut

    def close(self) -> None:
        """Idle workers exit now, busy ones after the jobs already accepted; idempotent."""
        with self._lock:
            self._closed = True
            for worker in self._idle:
                worker.job = None
                worker.wake.release()
            self._idle.clear()

    def _work(self, job: _Job | None) -> None:
        me = _Worker()
        while job is not None:
            loop, fut, fn = job
            try:
                result: tuple[bool, Any] = (True, fn())
            except BaseException as exc:  # handed to the awaiting coroutine, never lost
                result = (False, exc)
            del fn, job
            # Take the next job or go idle before waking the loop: once woken, the loop
            # thread wants the GIL back, and every bytecode run here after that delays it.
            exiting = False
            with self._lock:
                if self._backlog:
                    job = self._backlog.popleft()
                elif self._closed:
                    job, exiting = None, True
                    self._workers -= 1
                else:
                    job = None
                    self._idle.append(me)
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting
                loop.call_soon_threadsafe(_settle, fut, *result)
            del fut, loop, result
            if job is None and not exiting:
                job = self._wait(me)

    def _wait(self, me: _Worker) -> _Job | None:
        """The next job handed to ``me``, or None to exit (idle too long, or closed)."""
        if not me.wake.acquire(timeout=self._idle_seconds):
            with self._lock:
                if me in self._idle:  # nobody claimed us: leave
                    self._idle.remove(me)
                    self._workers -= 1
                    return None
            me.wake.acquire()  # a job was handed over just as the wait timed out
        job, me.job = me.job, None
        if job is None:  # closed
            with self._lock:
                self._workers -= 1
        return job
