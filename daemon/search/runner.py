"""Runs a search program with the output cap, the early stop and the timeout.

The program gets its own process group (its own session only when the daemon
has a terminal: see ``_group_kwargs``); whenever we stop reading (enough
rows, the 256 KiB cap, the timeout, or the request being cancelled) the whole
group is killed at once, so a search never scans on after its answer is known.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..identity import ExecUser
from ..procs.group import kill_group
from ..procs.launcher import Launched, spawn_as
from .limits import ENGINE_OUTPUT_CAP, STDERR_CAP
from .stall import watch_for_pipe_stall

_CHUNK = 64 * 1024


class OutputParser(Protocol):
    def feed(self, data: bytes) -> bool:
        """Consume engine output; True when enough rows were seen to stop the engine."""
        ...


@dataclass
class RunOutcome:
    exit_code: int | None
    capped: bool
    stopped: bool
    timed_out: bool
    stderr: str
    bytes_read: int
    # Killed because a thread sat waiting on a pipe (a FIFO named .gitignore): see stall.py.
    pipe_stall: bool = False

    @property
    def complete(self) -> bool:
        """The engine ran to its end and every byte it wrote was read."""
        return not (self.capped or self.stopped or self.timed_out or self.pipe_stall)


async def _drain_stderr(reader: asyncio.StreamReader | None, sink: bytearray) -> None:
    if reader is None:
        return
    while chunk := await reader.read(_CHUNK):
        room = STDERR_CAP - len(sink)
        if room > 0:
            sink += chunk[:room]


async def _discard(reader: asyncio.StreamReader) -> None:
    while await reader.read(_CHUNK):
        pass


async def run_engine(
    argv: Sequence[str],
    *,
    cwd: Path,
    parser: OutputParser,
    deadline: float,
    cap: int = ENGINE_OUTPUT_CAP,
    env: Mapping[str, str] | None = None,
    user: ExecUser | None = None,
    pass_fds: Sequence[int] = (),
) -> RunOutcome:
    """Run ``argv`` feeding stdout to ``parser`` until EOF, enough rows, ``cap`` or ``deadline``.

    ``deadline`` is a ``loop.time()`` instant shared by every phase of one search.
    ``user``: the exec user the engine runs as (it reads what the agent could read,
    nothing more); ``pass_fds``: descriptors the engine reads by number (recount).
    """
    loop = asyncio.get_running_loop()
    proc = await spawn_as(
        user,
        argv,
        cwd=str(cwd),
        env=env,
        pass_fds=pass_fds,
        new_session=_OWN_SESSION,
        pipes=_spawn_pipes,
    )
    _limit_memory(proc.pid)
    stderr = bytearray()
    stderr_task = asyncio.create_task(_drain_stderr(proc.stderr, stderr))
    stall_task = asyncio.create_task(watch_for_pipe_stall(proc.pid))
    read = 0
    capped = stopped = timed_out = False
    try:
        assert proc.stdout is not None
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                timed_out = True
                break
            try:
                chunk = await asyncio.wait_for(proc.stdout.read(_CHUNK), remaining)
            except TimeoutError:
                timed_out = True
                break
            if not chunk:
                break
            if read + len(chunk) > cap:
                chunk = chunk[: cap - read]
                capped = True
            read += len(chunk)
            if parser.feed(chunk):
                stopped = True
                break
            if capped:
                break
        if capped or stopped or timed_out:
            kill_group(proc.pid)
            # asyncio's wait() returns only once stdout is closed: drain what the killed
            # engine left in the pipe (EOF follows at once) so wait() can finish.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_discard(proc.stdout), 2.0)
        try:
            await asyncio.wait_for(proc.wait(), max(deadline - loop.time(), 1.0))
        except TimeoutError:
            timed_out = True
            kill_group(proc.pid)
            await proc.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stderr_task, 1.0)
    finally:
        if proc.returncode is None:
            # Cancelled (the client went away) or failed: never leave the engine running.
            kill_group(proc.pid)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            if proc.stdout is not None:
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(_discard(proc.stdout), 2.0)
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(proc.wait(), 2.0)
        if not stderr_task.done():
            stderr_task.cancel()
        if not stall_task.done():
            stall_task.cancel()
        if isinstance(proc, Launched):
            proc.release()
    pipe_stall = (
        stall_task.done()
        and not stall_task.cancelled()
        and stall_task.exception() is None
        and stall_task.result()
    )
    return RunOutcome(
        exit_code=proc.returncode,
        capped=capped,
        stopped=stopped,
        timed_out=timed_out,
        stderr=stderr.decode("utf-8", errors="replace"),
        bytes_read=read,
        pipe_stall=pipe_stall,
    )


def _has_controlling_tty() -> bool:
    """Whether this process has a controlling terminal (``tty_nr`` in /proc/self/stat)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[4]) != 0
    except (OSError, IndexError, ValueError):
        return True  # unknown: keep the engine away from any terminal


_OWN_SESSION = _has_controlling_tty()


def _group_kwargs() -> dict[str, Any]:
    """The engine's own process group (killed as one), and its own session only when the
    daemon has a terminal.

    A new session is also a new CPU group under the kernel's autogroup scheduling: a
    two-thread rg alone in one gets at most what a one-thread spinner's group leaves
    (one core of two), where in the daemon's group it is scheduled like the daemon's
    other work. Measured on this machine: rg took 0.93x the spinner's CPU from its own
    session and 1.55x from the spinner's (docs/performance.md). With a terminal, a
    session of its own keeps it away from ``/dev/tty``: an ignore file linked there
    would otherwise stop it with SIGTTIN instead of failing to open.
    """
    return {"start_new_session": True} if _OWN_SESSION else {"process_group": 0}


# An engine that reads something endless (an ignore file linked to /dev/zero: rg
# reads ignore files itself, following links) fails its allocation here instead of
# taking the machine's memory. Set from the parent right after the spawn (no
# preexec_fn in a threaded daemon); rg's normal use is far below it.
ENGINE_MEMORY_LIMIT = 1 << 30


async def _spawn_pipes(
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str] | None,
    pass_fds: Sequence[int],
    who: dict[str, Any],
) -> asyncio.subprocess.Process:
    """The per-spawn way: ``asyncio``'s subprocess with the engine's group and ``who``."""
    kwargs = {**_group_kwargs(), **who}
    return await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        pass_fds=tuple(pass_fds),
        **kwargs,
    )


def _limit_memory(pid: int) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        resource.prlimit(pid, resource.RLIMIT_AS, (ENGINE_MEMORY_LIMIT, ENGINE_MEMORY_LIMIT))


_IO_ERROR_MARKERS = ("os error", "permission denied", "no such file", "is a directory", "i/o error")


def is_io_error(stderr: str) -> bool:
    """Whether an engine's complaint is about reading some files (a partial result) rather
    than about the query itself (a bad regex, an unknown type: the caller's mistake)."""
    lowered = stderr.lower()
    return any(marker in lowered for marker in _IO_ERROR_MARKERS)


def timeout_message(timeout_s: float) -> str:
    return (
        f"file_search did not finish within {timeout_s:g} s and the engine was killed; "
        "narrow path or glob, or use a more specific pattern"
    )
