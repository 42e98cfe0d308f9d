"""A cgroup (v2) per agent command: membership the command cannot leave or forget.

Every process a command starts is born in its cgroup (fork inherits it) and
stays there whatever it does with its environment, session or parents: only a
writer with access to another cgroup's ``cgroup.procs`` can move it, and the
exec user has none. Sweeping is then one write to ``cgroup.kill`` (kernel
5.14+), or killing what ``cgroup.procs`` lists until it is empty.

airlockd keeps its cells under one directory of its own,
``<its cgroup>/airlockd-<pid>``, the subtree delegated to it; the daemon itself
stays where it was started. Nothing here needs a controller (``pids``,
``memory``): membership alone is what the sweep uses, so a hybrid host whose
v2 hierarchy has no controllers works too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from ..rights import as_daemon_call

_ROUNDS = 100


def _unescape(field: str) -> str:
    """``/proc/self/mountinfo`` escapes spaces and the like as ``\\NNN`` (octal)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def own_cgroup_dir() -> Path | None:
    """This process's cgroup v2 directory, or None without a mounted v2 hierarchy."""
    try:
        cgroups = Path("/proc/self/cgroup").read_text()
        mounts = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return None
    return cgroup_dir(cgroups, mounts)


def cgroup_dir(cgroups: str, mountinfo: str) -> Path | None:
    """Where the v2 path in ``/proc/self/cgroup`` (``0::/a/b``) is, given ``mountinfo``.

    A mount may show a subtree (its root field is not ``/``, as in a container
    that mounts its own cgroup); the path is then taken relative to that root.
    """
    own = next((line[3:] for line in cgroups.splitlines() if line.startswith("0::")), None)
    if own is None:
        return None
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        if not right.startswith("cgroup2 "):
            continue
        fields = left.split()
        root, mountpoint = _unescape(fields[3]), _unescape(fields[4])
        rel = own
        if root != "/" and (own == root or own.startswith(root + "/")):
            rel = own[len(root) :]
        return Path(mountpoint) / rel.lstrip("/")
    return None


@as_daemon_call
def make_base() -> tuple[Path | None, str]:
    """Create the daemon's own subtree; (its path, "") or (None, why it cannot be used)."""
    own = own_cgroup_dir()
    if own is None:
        return None, "no cgroup v2 hierarchy is mounted"
    _remove_stale(own)
    base = own / f"airlockd-{os.getpid()}"
    try:
        base.mkdir(exist_ok=True)
    except OSError as exc:
        return None, f"cannot create {base} ({exc.strerror}); the cgroup tree is not writable here"
    if not (base / "cgroup.procs").exists():
        with contextlib.suppress(OSError):
            base.rmdir()
        return None, f"{base} is not a cgroup v2 directory"
    return base, ""


def _remove_stale(own: Path) -> None:
    """Empty subtrees of daemons that died without cleaning up (their pid is gone)."""
    with contextlib.suppress(OSError):
        for entry in own.iterdir():
            name = entry.name
            if not name.startswith("airlockd-") or not name[9:].isdigit():
                continue
            if Path(f"/proc/{name[9:]}").exists():
                continue
            remove_tree(entry)


@as_daemon_call
def remove_tree(path: Path) -> None:
    """rmdir a cgroup and its (empty) children; a populated one stays (rmdir refuses)."""
    with contextlib.suppress(OSError):
        for child in path.iterdir():
            if child.is_dir():
                remove_tree(child)
    with contextlib.suppress(OSError):
        path.rmdir()


def pids(cell: Path) -> list[int]:
    """Every process in ``cell`` now."""
    try:
        return [int(x) for x in (cell / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def populated(cell: Path) -> bool:
    try:
        for line in (cell / "cgroup.events").read_text().splitlines():
            if line.startswith("populated "):
                return line.split()[1] != "0"
    except OSError:
        return False
    return bool(pids(cell))


@as_daemon_call
def move(cell: Path, pid: int) -> None:
    """Put ``pid`` (and its threads) in ``cell``; raises OSError when the kernel refuses."""
    with open(cell / "cgroup.procs", "w") as handle:
        handle.write(str(pid))


@as_daemon_call
def kill(cell: Path, wait_s: float = 5.0) -> set[int]:
    """SIGKILL everything in ``cell`` and wait (bounded) until it is empty; the pids seen.

    Blocking: run it in a worker thread. ``cgroup.kill`` kills atomically
    (nothing can fork past it); without it, each round kills what is listed
    and the next round catches what was forked in between.
    """
    seen: set[int] = set(pids(cell))
    killed = False
    with contextlib.suppress(OSError):
        (cell / "cgroup.kill").write_text("1")
        killed = True
    deadline = time.monotonic() + wait_s
    for _ in range(_ROUNDS * 50):
        listed = pids(cell)
        seen.update(listed)
        if not listed and not populated(cell):
            break
        if not killed or listed:
            for pid in listed:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            break
        time.sleep(0.002)
    return seen
