"""A lean thread hop for blocking file work, cheaper than ``asyncio.to_thread``.

Blocking file I/O (``realpath``'s lstats, ``open``, ``read``) must stay off the
event loop. ``asyncio.to_thread`` does that, but each call pays for a copied
context, a ``concurrent.futures.Future`` with its condition variable, the
executor's semaphore and ``wrap_future``'s two-way chaining: about 40 µs per
call on a 2-core machine, which was most of the gap between ``file_read`` and
a bare aiohttp handler. Here a job is one tuple handed to an idle worker
under one lock; the worker queues the result and writes an eventfd the loop
watches, and the loop settles every finished future in one callback
(``call_soon_threadsafe`` where eventfd is missing).

Workers are started on demand up to ``max_workers`` (so one slow read does not
stall the others) and exit after ``idle_seconds`` without work, so a workspace
that is dropped without ``close()`` (in-process tests) leaks no threads for
long.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from . import rights

T = TypeVar("T")

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any], "_Channel | None"]


def _settle(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    """Runs on the loop: the awaiting handler may have been cancelled meanwhile."""
    if fut.done():
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


_EVENTFD = hasattr(os, "eventfd")


class _Channel:
    """Completions for one event loop: workers queue results and bump an eventfd it watches.

    ``call_soon_threadsafe`` builds a handle (copying the context), writes the
    loop's self-pipe, and the loop then drains that pipe with two ``recv``
    calls and runs the handle in a separate step. Here the worker appends to a
    deque and writes the eventfd; the loop reads the counter once and settles
    every finished future in the same callback (15-30 µs less per hop here).

    ``pending`` counts writes still owed to the eventfd and is only touched on
    the loop thread; the fd is closed only when it is zero, so a worker never
    writes to a closed (or reused) descriptor.
    """

    __slots__ = ("closing", "done", "fd", "loop", "pending")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.done: deque[tuple[asyncio.Future[Any], bool, Any]] = deque()
        self.pending = 0
        self.closing = False
        loop.add_reader(self.fd, self._drain)

    def _drain(self) -> None:
        with contextlib.suppress(BlockingIOError):  # another drain already read the count
            self.pending -= os.eventfd_read(self.fd)
        while self.done:
            _settle(*self.done.popleft())
        if self.closing and self.pending == 0:
            self._close_fd()

    def complete(self, fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
        """Worker side: queue the result, then wake the loop."""
        self.done.append((fut, ok, value))
        os.eventfd_write(self.fd, 1)

    def retire(self) -> None:
        """Loop side (or after the loop closed): close once no write is owed."""
        self.closing = True
        if self.pending == 0:
            self._close_fd()

    def _close_fd(self) -> None:
        if self.fd < 0:
            return
        if not self.loop.is_closed():
            with contextlib.suppress(Exception):
                self.loop.remove_reader(self.fd)
        os.close(self.fd)
        self.fd = -1


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

    def __init__(
        self, max_workers: int = 8, idle_seconds: float = 30.0, name: str = "airlockd-io"
    ) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._backlog: deque[_Job] = deque()
        self._max = max_workers
        self._idle_seconds = idle_seconds
        self._workers = 0
        self._closed = False
        self._channel: _Channel | None = None

    async def run(self, fn: Callable[[], T]) -> T:
        """``await fn()`` on a worker thread; exceptions propagate unchanged."""
        loop = asyncio.get_running_loop()
        if self._closed:
            raise RuntimeError("ThreadHop is closed")
        channel = self._channel
        if channel is None or channel.loop is not loop:
            channel = self._switch_channel(loop)
        fut: asyncio.Future[T] = loop.create_future()
        job: _Job = (loop, fut, fn, channel)
        if channel is not None:
            channel.pending += 1
        with self._lock:
            if self._idle:
                worker = self._idle.pop()
                worker.job = job
                worker.wake.release()
            elif self._workers < self._max:
                self._workers += 1
                threading.Thread(
                    target=self._work, args=(job,), name=self._name, daemon=True
                ).start()
            else:
                self._backlog.append(job)
        return await fut

    def _switch_channel(self, loop: asyncio.AbstractEventLoop) -> _Channel | None:
        """The completion channel for ``loop`` (a new one if the hop moved to another loop)."""
        if self._channel is not None:
            self._channel.retire()
        self._channel = None
        if _EVENTFD:
            with contextlib.suppress(OSError):  # no eventfd to spare: call_soon_threadsafe
                self._channel = _Channel(loop)
        return self._channel

    def close(self) -> None:
        """Idle workers exit now, busy ones after the jobs already accepted; idempotent.

        Call it from the loop thread (``Workspace.aclose`` does).
        """
        if self._channel is not None:
            self._channel.retire()
        with self._lock:
            self._closed = True
            for worker in self._idle:
                worker.job = None
                worker.wake.release()
            self._idle.clear()

    def _work(self, job: _Job | None) -> None:
        # Workspace I/O runs with the exec user's filesystem identity (daemon/rights.py).
        rights.enter_exec_user()
        me = _Worker()
        while job is not None:
            loop, fut, fn, channel = job
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
            if channel is not None:
                channel.complete(fut, *result)
            else:
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting
                    loop.call_soon_threadsafe(_settle, fut, *result)
            del fut, loop, result, channel
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


# ---------------------------------------------------------------- the CPU pool

# CPU-heavy work (diffs and previews, matching, serialising or parsing large
# bodies) holds the GIL for its whole run. On its own thread per call, eight
# concurrent previews were eight threads taking the GIL from the event loop
# in turn, and /v1/health waited 0.5 s and more. Sharing one small pool bounds
# the threads the loop competes with, whatever the callers send; the work
# queues instead (first come, first served), which costs no throughput, since
# the GIL lets only one of them run at a time anyway.
CPU_WORKERS = 1
_CPU_POOL = ThreadHop(max_workers=CPU_WORKERS, idle_seconds=30.0, name="airlockd-cpu")


async def run_cpu(fn: Callable[[], T]) -> T:
    """``await fn()`` on the shared CPU pool (for work that computes rather than waits)."""
    return await _CPU_POOL.run(fn)
