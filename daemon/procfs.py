"""Per-thread files of a process in ``/proc``, read without a full ``/proc`` scan.

Two places look inside a child's threads: the process tree sweep (each
thread's ``children``) and the search runner's stall check (each thread's
``wchan``). Both want "every thread's file, skipping threads that vanished",
which lives here once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator


def task_files(pid: int, name: str, limit: int = -1) -> Iterator[tuple[int, bytes]]:
    """``(tid, contents)`` of ``/proc/<pid>/task/<tid>/<name>`` for each thread still there
    (``limit`` bytes each, -1 for all). Nothing when the process is gone or /proc is not
    readable."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/{name}", "rb") as handle:
                data = handle.read(limit)
        except OSError:
            continue
        yield int(tid), data
