"""Files under a lease: found before a search so the engine never opens (and waits on) one.

An ``open`` of a file another process holds a lease on (``F_SETLEASE``) blocks
until the holder gives it up or ``/proc/sys/fs/lease-break-time`` passes
(45 s by default): an agent holding one lease made every ``file_search`` run
into the 30 s timeout. rg and grep open files by name with no way to ask for
``O_NONBLOCK``, so the daemon finds the leased files first and excludes them,
with a note. (Mandatory locks, the other thing that blocks a plain ``read``,
were removed from Linux in 5.15; the daemon's own opens use ``O_NONBLOCK`` and
fail at once on either.)

``/proc/locks`` lists every lease with the holder's pid and the file's device
and inode; the holder has the file open, so ``/proc/PID/fd`` names it:
``stat`` (which never opens, so never breaks a lease) matches the inode and
``readlink`` gives the path. Only paths inside the searched root are kept. A
lease taken after this look (a race the agent can win) is caught by the
daemon's non-blocking re-open of every row, but the engine may then wait up to
the search timeout; that is the agent stalling its own call.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

_LOCKS = "/proc/locks"
_GLOB_META = frozenset("*?[]{}\\!")


Lease = tuple[int, int, int, int]


def current_leases() -> list[Lease]:
    """(pid, major, minor, inode) of every lease on the system (usually none).

    ``/proc/locks`` is generated from kernel memory and never blocks, so this
    may run on the event loop; only when leases exist is there more to do.
    """
    try:
        with open(_LOCKS, encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    out: list[Lease] = []
    for line in text.splitlines():
        fields = line.split()
        if "LEASE" not in fields and "DELEG" not in fields:
            continue
        with contextlib.suppress(ValueError, IndexError):
            # "N: LEASE  ACTIVE  WRITE PID MAJ:MIN:INODE START END" (maj/min in hex)
            where = next(f for f in fields if f.count(":") == 2)
            pid = int(fields[fields.index(where) - 1])
            major, minor, inode = where.split(":")
            out.append((pid, int(major, 16), int(minor, 16), int(inode)))
    return out


def leased_under(root: Path, rel: str, leases: list[Lease]) -> list[str]:
    """Paths (relative to ``root``) of the ``leases``' files under ``root/rel`` (blocking)."""
    found: list[str] = []
    base = str(root / rel) if rel else str(root)
    prefix = base.rstrip("/") + "/"
    for pid, major, minor, inode in leases:
        fd_dir = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for name in names:
            link = f"{fd_dir}/{name}"
            try:
                st = os.stat(link)
                if (
                    st.st_ino != inode
                    or os.major(st.st_dev) != major
                    or os.minor(st.st_dev) != minor
                ):
                    continue
                target = os.readlink(link)
            except OSError:
                continue
            if target.startswith(prefix) or target == base:
                rel_path = os.path.relpath(target, root)
                if rel_path not in found:
                    found.append(rel_path)
            break
    return sorted(found)


def exclude_glob(rel_path: str) -> str:
    """An rg ``--glob`` that leaves out exactly ``rel_path`` (anchored, metacharacters escaped)."""
    escaped = "".join("\\" + ch if ch in _GLOB_META else ch for ch in rel_path)
    return "!/" + escaped


def note(paths: list[str]) -> str:
    shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    return (
        f"Not searched: {shown}: another process holds a lease on "
        f"{'it' if len(paths) == 1 else 'them'} (F_SETLEASE), and opening a leased file "
        "waits until the lease is given up. Release the lease (or close that process) and "
        "search again."
    )
