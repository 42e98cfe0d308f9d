"""One way to stop a process the tests started: TERM, a deadline, then KILL.

Works for ``subprocess.Popen`` and ``asyncio.subprocess.Process``; with
``group=True`` the signal goes to the process group (for processes started
with ``start_new_session=True``, whose children must not outlive the test).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys

#: A Python program that does nothing until a signal kills it (a child to kill).
LINGER = "import signal\nwhile True:\n    signal.pause()\n"
#: ``LINGER`` as an argv.
LINGER_ARGV = (sys.executable, "-c", LINGER)


def processes_with(marker: str) -> list[int]:
    """Pids of the processes whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(entry))
    return found


def _signal(pid: int, sig: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def stop_process(proc: subprocess.Popen[bytes] | subprocess.Popen[str], *, timeout: float = 15.0,
                 group: bool = False) -> int:  # fmt: skip
    """Stop ``proc`` and reap it; returns its exit status (never leaves a zombie)."""
    if proc.poll() is None:
        _signal(proc.pid, signal.SIGTERM, group)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _signal(proc.pid, signal.SIGKILL, group)
            proc.wait(timeout)
    elif group:
        _signal(proc.pid, signal.SIGKILL, group)  # stragglers of an exited leader
    return proc.returncode


async def stop_async_process(
    proc: asyncio.subprocess.Process, *, timeout: float = 15.0, group: bool = False
) -> int:
    """:func:`stop_process` for ``asyncio.create_subprocess_exec`` processes."""
    if proc.returncode is None:
        _signal(proc.pid, signal.SIGTERM, group)
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            _signal(proc.pid, signal.SIGKILL, group)
            await asyncio.wait_for(proc.wait(), timeout)
    assert proc.returncode is not None
    return proc.returncode
