"""Stopping a child process the way every harness and bench does: politely, then firmly."""

from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL after 10 s; always reaped."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
