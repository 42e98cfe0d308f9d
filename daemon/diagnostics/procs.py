"""Running a checker subprocess with a deadline, killing its whole group on the way out.

Type checkers spawn their own children (basedpyright runs node); a timeout or
a cancelled request must take all of them down, so each runs in its own
session and the group is killed, never just the leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


class CheckTimeout(Exception):
    """The checker did not finish within the deadline (it has been killed)."""


class CheckUnavailable(Exception):
    """The checker cannot run here (not installed, not executable); the message says why."""


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: bytes
    stderr: bytes


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_bounded(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout_s: float,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> Completed:
    """Run ``argv`` to completion or kill its process group after ``timeout_s``."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        raise CheckUnavailable(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout_s)
    except TimeoutError:
        kill_group(proc.pid)
        await proc.wait()
        raise CheckTimeout(f"{Path(argv[0]).name} did not finish within {timeout_s:g}s") from None
    except BaseException:
        kill_group(proc.pid)
        with contextlib.suppress(BaseException):
            await asyncio.shield(proc.wait())
        raise
    kill_group(proc.pid)  # stragglers a checker left behind in its group
    return Completed(proc.returncode if proc.returncode is not None else -1, out, err)
