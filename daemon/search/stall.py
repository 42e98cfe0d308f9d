"""An engine parked on a FIFO: seen in /proc, stopped at once, and the culprit named.

rg opens ``.gitignore``/``.ignore``/``.rgignore`` itself, with a blocking
``open``: a FIFO by one of those names holds a walker thread in the kernel
(``wait_for_partner``, or ``pipe_read`` once some writer holds it open) for
good, and the search used to sit there until its 30 s timeout. No rg flag makes
it skip non-regular ignore files, and finding them before every search would
cost a second walk of the tree. Instead the runner looks, only while an engine
is still running after ``FIRST_CHECK_S``, at where its threads sleep
(``/proc/PID/task/TID/wchan``, readable for one's own child); a thread seen
waiting on a pipe at two checks in a row is a stall (an engine never reads a
pipe otherwise: its stdin is ``/dev/null`` and it skips FIFOs it walks past).
Where ``wchan`` is not available (no kallsyms, another kernel), nothing is
seen and the timeout still bounds the search, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
from pathlib import Path

from ..procfs import task_files
from .ignore import IGNORE_FILE_NAMES, opened
from .walk import walk

FIRST_CHECK_S = 0.5
CHECK_EVERY_S = 0.5
# Kernel functions a task sleeps in while opening or reading a pipe (names across
# kernel versions: pipe_wait before 5.10, anon_pipe_read since 6.15).
PIPE_WAITS = frozenset(
    {
        "wait_for_partner",
        "fifo_open",
        "pipe_read",
        "anon_pipe_read",
        "fifo_pipe_read",
        "pipe_wait",
        "pipe_wait_readable",
    }
)
# Naming the culprit walks the tree once more (only after a stall), bounded.
_FIND_MAX_ENTRIES = 200_000
_FIND_MAX_NAMES = 5


def pipe_waiters(pid: int) -> set[int]:
    """Thread ids of ``pid`` that sleep in a pipe open or read right now."""
    return {
        tid
        for tid, where in task_files(pid, "wchan", 128)
        if where.decode("ascii", errors="replace").strip() in PIPE_WAITS
    }


async def watch_for_pipe_stall(pid: int) -> bool:
    """Return True (after killing ``pid``'s process group) once one of its threads has been
    seen waiting on a pipe at two checks in a row; run as a task, cancelled when the
    engine ends. A search that ends before ``FIRST_CHECK_S`` never reads /proc."""
    await asyncio.sleep(FIRST_CHECK_S)
    seen: set[int] = set()
    while True:
        now = pipe_waiters(pid)
        if seen & now:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            return True
        seen = now
        await asyncio.sleep(CHECK_EVERY_S)


def blocking_ignore_files(root: Path, rel: str) -> list[str]:
    """Ignore files an engine searching ``root/rel`` could block on: FIFOs, sockets and
    devices by those names, and links by those names (rg follows them; they are not
    followed here), in ``rel``'s ancestors inside the root (rg reads those too) and under
    it (the shared walker: below the root, never through a link). Paths relative to
    ``root``; bounded, for the error message only."""
    found: list[str] = []
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    try:
        with opened(root, None) as base:
            for depth in range(len(parts)):
                above = "/".join(parts[:depth])
                with contextlib.suppress(OSError), opened(root, base, above) as fd:
                    _check_names(fd, above, found)
            entries = walk(
                root,
                "/".join(parts),
                max_depth=None,
                include_hidden=True,
                ignore=None,
                root_fd=base,
                with_other=True,
            )
            for seen, entry in enumerate(entries):
                if len(found) >= _FIND_MAX_NAMES or seen >= _FIND_MAX_ENTRIES:
                    break
                name = entry.rel.rsplit("/", 1)[-1]
                if name in IGNORE_FILE_NAMES and entry.kind in ("symlink", "other"):
                    _found(found, entry.rel, entry.kind == "symlink")
    except OSError:
        pass
    return found


def _check_names(dir_fd: int, dir_rel: str, found: list[str]) -> None:
    """The ignore-file names in one directory that are not regular files."""
    for name in IGNORE_FILE_NAMES:
        try:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            _found(found, f"{dir_rel}/{name}" if dir_rel else name, stat.S_ISLNK(mode))


def _found(found: list[str], rel: str, link: bool) -> None:
    # Shown, never reopened: a name that is not UTF-8 gets U+FFFD (JSON-safe).
    shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    found.append(shown + (" (a link)" if link else ""))


def stall_message(searched: str, culprits: list[str]) -> str:
    where = "; found: " + ", ".join(culprits) if culprits else ""
    return (
        f"file_search stopped: the search engine blocked reading an ignore file in or above "
        f"{searched} that is not a regular file (a FIFO named .gitignore, .ignore or "
        f".rgignore, or a link to one){where}. rg reads ignore files itself and would wait "
        "for a writer forever. Replace it with a regular file or remove it, or pass "
        "include_ignored=true (no ignore files are read)."
    )
