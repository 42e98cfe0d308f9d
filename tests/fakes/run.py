"""Run a real program from an async test and read what it printed."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path


async def run_combined(
    argv: list[str], *, env: Mapping[str, str], cwd: Path | None = None
) -> tuple[int, str]:
    """(exit status, stdout and stderr interleaved as a terminal shows them).

    Without blocking the event loop, so the servers the test runs in it keep
    answering the program.
    """
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=dict(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode(errors="replace")
