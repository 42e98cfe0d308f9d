"""Starting checker processes safely, and running one-shot checkers with a deadline.

Why not ``asyncio.create_subprocess_exec``: on Python 3.11, a task cancelled
while that call is connecting the pipes (an abandoned baseline, or the loop
shutting down, which cancels the transport's internal pipe-connecting task
too) can wait forever for the transport to finish, hanging the loop's
shutdown. :func:`spawn` starts the process with ``subprocess.Popen`` (the same
synchronous fork/exec asyncio does) and only then attaches the pipes; a
cancellation at any point leaves a process we own and kill.

Type checkers spawn their own children (basedpyright runs node); a timeout or
a cancelled request must take all of them down, so each runs in its own
session and the group is killed, never just the leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..identity import ExecUser, spawn_kwargs
from ..procs.group import kill_group
from ..rights import as_daemon

STREAM_LIMIT = 64 * 1024 * 1024
_REAP_WAIT_S = 5.0


class CheckTimeout(Exception):
    """The checker did not finish within the deadline (it has been killed)."""


class CheckUnavailable(Exception):
    """The checker cannot run here (not installed, not executable); the message says why."""


@dataclass(frozen=True)
class RunAs:
    """Who a checker process runs as, and whether it may be a program of the workspace.

    Read scope (``workspace_code=False``): only programs the daemon ships or the
    system has (its own interpreter, a pinned TypeScript); never the workspace's
    interpreter or ``node_modules``. Write scope (``workspace_code=True``): the
    project's own interpreter and compiler may run. In both, a ``user`` (the
    exec user, ``--exec-user``) is who the checker runs as, with that user's
    HOME: a checker reads files the agent planted (imports, symlinks), and as
    the daemon's user it would read for the agent what the agent cannot.
    ``READ_SCOPE`` (no user) is the daemon's own identity, for daemons without
    an exec user and for git (which runs nothing and reads only the index).
    """

    workspace_code: bool = False
    user: ExecUser | None = None

    @property
    def key(self) -> tuple[bool, int | None]:
        """Long-lived checkers are kept per identity: one never serves the other."""
        return (self.workspace_code, self.user.uid if self.user else None)

    def popen_kwargs(self) -> dict[str, Any]:
        return spawn_kwargs(self.user)

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        if self.user is not None and not self.user.is_current:
            env.update(self.user.env())
        return env


READ_SCOPE = RunAs()


class _Reading(asyncio.StreamReaderProtocol):
    """A pipe protocol that keeps its reader alive.

    ``StreamReaderProtocol`` holds its reader weakly; a task blocked in
    ``readline`` would then be reachable only from its own owner, and a dropped
    owner would let the garbage collector destroy the pending task. Holding the
    reader strongly ties the task to the pipe, which the loop keeps alive.
    """

    def __init__(self, reader: asyncio.StreamReader, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(reader, loop=loop)
        self.reader = reader


@dataclass
class Spawned:
    """A child process with asyncio streams on its pipes."""

    proc: subprocess.Popen[bytes]
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader | None = None
    stdin: asyncio.WriteTransport | None = None
    transports: list[asyncio.BaseTransport] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def write(self, data: bytes) -> None:
        if self.stdin is None or self.stdin.is_closing():
            raise ConnectionError("the process's input is closed")
        self.stdin.write(data)

    def kill(self) -> None:
        """Kill the process group (idempotent); the pipes stay until :meth:`reap`."""
        if self.proc.poll() is None:
            kill_group(self.proc.pid)

    def close_pipes(self) -> None:
        for transport in self.transports:
            transport.close()

    async def reap(self) -> None:
        """Kill, close our ends, collect the exit status (waits in a thread, briefly)."""
        self.kill()
        self.close_pipes()
        with contextlib.suppress(BaseException):
            await asyncio.to_thread(self._wait)

    def _wait(self) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(_REAP_WAIT_S)


def _popen(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str] | None,
    stdin: bool,
    stderr: bool,
    run_as: RunAs = READ_SCOPE,
) -> subprocess.Popen[bytes]:
    """fork/exec, synchronously: exactly what asyncio's own subprocess support does in the
    loop thread (a few milliseconds), minus the cancellable pipe set-up in between."""
    try:
        return subprocess.Popen(
            list(argv),
            cwd=str(cwd),
            env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stderr else subprocess.DEVNULL,
            start_new_session=True,
            **run_as.popen_kwargs(),
        )
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise CheckUnavailable(f"cannot start {argv[0]}: {reason}") from exc


async def spawn(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str] | None = None,
    stdin: bool = True,
    stderr: bool = False,
    limit: int = STREAM_LIMIT,
    run_as: RunAs = READ_SCOPE,
) -> Spawned:
    """Start ``argv`` in its own session with piped stdout (and stdin/stderr if asked)."""
    # The fork and the interpreter lookup use the daemon's own rights (the worker's
    # interpreter may sit where the exec user cannot search); a checker that runs as the
    # exec user switches its uid in the child before exec (``run_as``).
    with as_daemon():
        proc = _popen(argv, cwd=cwd, env=env, stdin=stdin, stderr=stderr, run_as=run_as)
    loop = asyncio.get_running_loop()
    spawned = Spawned(proc=proc, stdout=asyncio.StreamReader(limit=limit, loop=loop))
    try:
        assert proc.stdout is not None
        transport, _ = await loop.connect_read_pipe(
            lambda: _Reading(spawned.stdout, loop), proc.stdout
        )
        spawned.transports.append(transport)
        if stderr:
            assert proc.stderr is not None
            spawned.stderr = asyncio.StreamReader(limit=limit, loop=loop)
            err_reader = spawned.stderr
            transport, _ = await loop.connect_read_pipe(
                lambda: _Reading(err_reader, loop), proc.stderr
            )
            spawned.transports.append(transport)
        if stdin:
            assert proc.stdin is not None
            writer, _ = await loop.connect_write_pipe(asyncio.Protocol, proc.stdin)
            spawned.stdin = writer
            spawned.transports.append(writer)
    except BaseException:
        spawned.kill()
        spawned.close_pipes()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        raise
    return spawned


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: bytes
    stderr: bytes


async def run_bounded(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout_s: float,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    run_as: RunAs = READ_SCOPE,
) -> Completed:
    """Run ``argv`` to completion or kill its process group after ``timeout_s``."""
    spawned = await spawn(
        argv, cwd=cwd, env=env, stdin=stdin is not None, stderr=True, run_as=run_as
    )
    assert spawned.stderr is not None
    err_stream = spawned.stderr

    async def communicate() -> tuple[bytes, bytes, int]:
        if stdin is not None and spawned.stdin is not None:
            spawned.stdin.write(stdin)
            spawned.stdin.close()
        out, err = await asyncio.gather(spawned.stdout.read(), err_stream.read())
        code = await asyncio.to_thread(spawned.proc.wait)
        return out, err, code

    try:
        out, err, code = await asyncio.wait_for(communicate(), timeout_s)
    except TimeoutError:
        await spawned.reap()
        raise CheckTimeout(f"{Path(argv[0]).name} did not finish within {timeout_s:g}s") from None
    except BaseException:
        await asyncio.shield(spawned.reap())
        raise
    await spawned.reap()  # stragglers a checker left behind in its group; our pipe ends
    return Completed(code, out, err)
