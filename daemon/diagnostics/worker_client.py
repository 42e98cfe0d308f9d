"""The daemon's side of a long-lived checker process: one child, many requests.

Two kinds run this way: the Python worker (``worker.py``: tree-sitter and
the exact parsers, kept warm and out of the daemon's GIL) and the TypeScript
checker (``types.py``: node with the compiler, which keeps parsed lib and
project files between edits). Both speak one JSON object per line, answers
carrying the request's ``id``; requests are multiplexed over the pipes. A
request that outlives its deadline kills the process (it is stuck in work
that cannot be interrupted) and the next request starts a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..procs.group import kill_group
from .procs import (
    READ_SCOPE,
    CheckTimeout,
    RunAs,
    Spawned,
    spawn,
)


def _python_path() -> str:
    """The folder that holds the ``airlock`` package, so the child imports the same code."""
    import airlock

    package_parent = str(Path(next(iter(airlock.__path__))).parent)
    existing = os.environ.get("PYTHONPATH")
    return package_parent + (os.pathsep + existing if existing else "")


def python_worker_command() -> tuple[list[str], dict[str, str]]:
    """argv and environment of the syntax/whitespace worker."""
    env = {**os.environ, "PYTHONPATH": _python_path(), "PYTHONDONTWRITEBYTECODE": "1"}
    return [sys.executable, "-m", "airlock.daemon.diagnostics.worker"], env


class WorkerGone(Exception):
    """The worker exited (crashed or was killed) while a request was pending."""


def _kill_all(pids: set[int]) -> None:
    """Finaliser of a dropped client: its worker must not outlive it."""
    for pid in list(pids):
        kill_group(pid)
    pids.clear()


class _Channel:
    """One worker process and the requests waiting on it."""

    def __init__(self, spawned: Spawned, live: set[int]) -> None:
        self.spawned = spawned
        self.live = live
        live.add(spawned.pid)
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.reader: asyncio.Task[None] = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            while line := await self.spawned.stdout.readline():
                try:
                    answer = json.loads(line)
                except ValueError:
                    continue
                future = self.pending.get(answer.get("id"))
                if future is not None and not future.done():
                    future.set_result(answer)
        except (ValueError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            # Also reached when the task is cancelled: asyncio.run and pytest-asyncio cancel
            # every task before closing the loop, so the worker never outlives its loop even
            # when nobody calls aclose (a Workspace in a reference cycle is freed late).
            self.live.discard(self.spawned.pid)
            for future in list(self.pending.values()):
                if not future.done():
                    future.set_exception(WorkerGone("the diagnostics worker exited"))
            await self.spawned.reap()

    @property
    def alive(self) -> bool:
        return self.spawned.running and not self.reader.done()

    def kill(self) -> None:
        self.spawned.kill()
        self.live.discard(self.spawned.pid)


class WorkerClient:
    """Owns at most one worker process, bound to the event loop that started it."""

    def __init__(
        self,
        command: Callable[[], tuple[list[str], dict[str, str]]] = python_worker_command,
        name: str = "the diagnostics worker",
        run_as: RunAs = READ_SCOPE,
    ) -> None:
        self._command = command
        self.name = name
        self.run_as = run_as
        self._channel: _Channel | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ids = itertools.count(1)
        self._start_lock: asyncio.Lock | None = None
        # A Workspace that is simply dropped (tests, embedders) never calls aclose;
        # the finaliser kills its worker so workers cannot pile up in one process.
        self._live: set[int] = set()
        self._dying: set[_Channel] = set()  # killed, not yet reaped: aclose waits for them
        weakref.finalize(self, _kill_all, self._live)

    @property
    def pid(self) -> int | None:
        return self._channel.spawned.pid if self._channel is not None else None

    async def request(
        self, payload: dict[str, Any], timeout_s: float, content: bytes | None = None
    ) -> dict[str, Any]:
        """Send one request; raises CheckTimeout, CheckUnavailable or WorkerGone.

        ``content`` travels after the request line (``content_bytes`` says how
        many bytes): the file's bytes, which the syntax worker checks (it never
        opens the file itself).
        """
        channel = await self._ensure()
        ident = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        channel.pending[ident] = future
        try:
            try:
                header = {**payload, "id": ident}
                if content is not None:
                    header["content_bytes"] = len(content)
                channel.spawned.write((json.dumps(header) + "\n").encode())
                if content:
                    channel.spawned.write(content)
            except (BrokenPipeError, ConnectionError) as exc:
                self._discard(channel)
                raise WorkerGone("the diagnostics worker exited") from exc
            try:
                return await asyncio.wait_for(asyncio.shield(future), timeout_s)
            except TimeoutError:
                self._discard(channel)
                raise CheckTimeout(f"no answer within {timeout_s:g}s") from None
        finally:
            channel.pending.pop(ident, None)
            if not future.done():
                future.cancel()

    async def _ensure(self) -> _Channel:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._channel is not None:
                self._channel.kill()  # bound to another (closed) loop: unusable here
                self._channel = None
            self._loop = loop
            self._start_lock = asyncio.Lock()
        assert self._start_lock is not None
        async with self._start_lock:
            if self._channel is not None and self._channel.alive:
                return self._channel
            argv, env = self._command()
            spawned = await spawn(argv, cwd="/", env=env, run_as=self.run_as)
            self._channel = _Channel(spawned, self._live)
            return self._channel

    def _discard(self, channel: _Channel) -> None:
        channel.kill()
        self._dying.add(channel)
        channel.reader.add_done_callback(lambda _: self._dying.discard(channel))
        if self._channel is channel:
            self._channel = None

    async def aclose(self) -> None:
        """Stop the worker(s) and wait for them, so tests and shutdown leave nothing behind."""
        channels = [*self._dying, *([self._channel] if self._channel is not None else [])]
        self._channel = None
        self._dying.clear()
        for channel in channels:
            channel.kill()
        if self._loop is not asyncio.get_running_loop():
            return
        for channel in channels:
            with contextlib.suppress(BaseException):
                await channel.reader  # it reaps the process
