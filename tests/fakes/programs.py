"""Run a program to completion from a test and get back what it said.

One place for the ``create_subprocess_exec`` + ``communicate`` dance the CLI
tests repeat: the exit code and both streams, decoded, with stderr optionally
folded into stdout (what a person at a terminal sees).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from pathlib import Path


async def run_program(
    *argv: str,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    merge_stderr: bool = False,
) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``argv``; stderr is "" when ``merge_stderr`` folds it in."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=None if env is None else dict(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), (err or b"").decode()


async def run_airlock(
    *args: str, cwd: Path | str | None = None, env: Mapping[str, str] | None = None
) -> tuple[int, str, str]:
    """The ``airlock`` operator CLI from this checkout's interpreter, as a subprocess."""
    return await run_program(sys.executable, "-m", "airlock.client.cli", *args, cwd=cwd, env=env)
