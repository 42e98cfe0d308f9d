"""Finding and killing every process a command started, wherever it went.

A process group is not enough: a grandchild can ``setsid`` (new session and
group) and double-fork (its parent exits, so it is no longer anybody's
descendant). What makes such a process findable again, strongest first:

- its *cell* (:mod:`.contain`): the command's cgroup, or in the ``/proc``
  tree fallback the supplementary-group tag it was born with; neither can be
  shed by an unprivileged process nor depends on catching it in time;
- airlockd is a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): an
  orphan below it is re-parented to airlockd instead of init, so it stays in
  the daemon's tree, and airlockd reaps it (no zombies pile up);
- the session and process group the daemon created for the command;
- while the command runs, :class:`TreeGuard` walks its subtree
  (``/proc/PID/task/*/children``) and remembers every member by pid *and*
  start time (so a recycled pid is never mistaken for a member);
- a marker in its environment (``AIRLOCK_TREE=<id>``), best effort for a
  daemon that cannot tag (no user switch and no cgroup).

At the end a sweep kills the cgroup, then takes the union of all the above and
their descendants; it stops them all (``SIGSTOP``, so nothing forks while the
sweep looks again), repeats until the set is stable, then ``SIGKILL``s them and
reaps the adopted ones. Limits (documented in docs/daemon.md): without a
cgroup and without a user switch (so no tag), a process that double-forks,
calls ``setsid`` and ``exec``s with a scrubbed environment between two walks
escapes attribution; it is still airlockd's descendant and is killed when the
daemon stops.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..procfs import task_files
from .contain import Cell

MARKER_VAR = "AIRLOCK_TREE"
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
_MAX_ROUNDS = 50


_TICKS = os.sysconf("SC_CLK_TCK")


def boot_ticks_now() -> int:
    """Now, in the unit of ``/proc/PID/stat``'s start time (clock ticks since boot)."""
    with open("/proc/uptime", "rb") as handle:
        return int(float(handle.read().split()[0]) * _TICKS)


def become_subreaper() -> bool:
    """Make this process a child subreaper; False where the kernel refuses (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class ProcInfo:
    """The fields of ``/proc/PID/stat`` a sweep needs."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    starttime: int


def read_stat(pid: int) -> ProcInfo | None:
    """One process's stat line, or None when it is gone (or not readable)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return ProcInfo(
            pid=pid,
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            sid=int(fields[3]),
            state=fields[0].decode(),
            starttime=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def scan() -> dict[int, ProcInfo]:
    """Every process on the machine (that ``/proc`` shows), by pid (slow on a busy machine)."""
    result: dict[int, ProcInfo] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = read_stat(int(name))
            if info is not None:
                result[info.pid] = info
    return result


def is_subreaper() -> bool:
    """Whether this process is a child subreaper (``PR_GET_CHILD_SUBREAPER``)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        flag = ctypes.c_int(0)
        return bool(
            libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value
        )
    except (OSError, AttributeError):
        return False


def subtree(pid: int) -> dict[int, ProcInfo]:
    """``pid`` and its descendants, walked through ``children`` files (no full scan)."""
    found: dict[int, ProcInfo] = {}
    stack = [pid]
    while stack:
        current = stack.pop()
        if current in found:
            continue
        info = read_stat(current)
        if info is None:
            continue
        found[current] = info
        stack.extend(children_of(current))
    return found


def snapshot() -> dict[int, ProcInfo]:
    """The processes a sweep must consider.

    In a subreaper every descendant of a command stays below it (orphans are
    re-parented here), so walking our own subtree sees them all, at a fraction
    of a full ``/proc`` scan. Anywhere else an orphan goes to init, and only a
    full scan finds it.
    """
    return subtree(os.getpid()) if is_subreaper() else scan()


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (all of its threads'), cheap: no full ``/proc`` scan."""
    return [int(x) for _, listed in task_files(pid, "children") for x in listed.split()]


def has_marker(pid: int, marker: bytes) -> bool:
    """True when ``pid``'s initial environment holds ``marker`` (``NAME=value``)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            env = handle.read()
    except OSError:
        return False
    return env.startswith(marker + b"\0") or (b"\0" + marker + b"\0") in env


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as dead)."""
    info = read_stat(pid)
    return info is not None and info.state not in ("Z", "X")


def descendants(snap: dict[int, ProcInfo], roots: Iterable[int]) -> set[int]:
    """``roots`` and everything below them in ``snap`` (by parent pid)."""
    by_parent: dict[int, list[int]] = {}
    for info in snap.values():
        by_parent.setdefault(info.ppid, []).append(info.pid)
    found: set[int] = set()
    stack = [pid for pid in roots if pid in snap]
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        found.add(pid)
        stack.extend(by_parent.get(pid, ()))
    return found


@dataclass
class TreeGuard:
    """Everything one command (``exec``, a stream, a background process) started."""

    root: int
    tree_id: str
    cell: Cell | None = None
    seen: dict[int, int] = field(default_factory=dict)
    since: int = 0

    def __post_init__(self) -> None:
        info = read_stat(self.root)
        # Start times are clock ticks since boot; a root already gone falls back to "a second ago".
        self.since = info.starttime if info is not None else boot_ticks_now() - _TICKS
        if info is not None:
            self.seen[self.root] = info.starttime

    @property
    def marker(self) -> bytes:
        return f"{MARKER_VAR}={self.tree_id}".encode()

    def track(self) -> None:
        """Record the current subtree (pid and start time); cheap enough to poll."""
        stack = [pid for pid in list(self.seen) if alive(pid)]
        visited: set[int] = set()
        while stack:
            pid = stack.pop()
            if pid in visited:
                continue
            visited.add(pid)
            for kid in children_of(pid):
                if kid not in self.seen:
                    info = read_stat(kid)
                    if info is None:
                        continue
                    self.seen[kid] = info.starttime
                stack.append(kid)

    def members(self, snap: dict[int, ProcInfo]) -> set[int]:
        """Every live process of this tree in ``snap`` (see the module docstring)."""
        me = os.getpid()
        # A copy: a tracking walk in another thread may still be adding members.
        roots = {
            pid
            for pid, start in list(self.seen.items())
            if pid in snap and snap[pid].starttime == start
        }
        if self.cell is not None:
            roots |= {pid for pid in self.cell.members(snap) if pid in snap}
        for info in snap.values():
            if info.pid == me or info.state in ("Z", "X"):
                continue
            if (
                info.sid == self.root
                or info.pgid == self.root
                or (
                    info.starttime >= self.since
                    and info.pid not in roots
                    and has_marker(info.pid, self.marker)
                )
            ):
                roots.add(info.pid)
        found = descendants(snap, roots)
        found.discard(me)
        return {pid for pid in found if snap[pid].state not in ("Z", "X")}

    def kill_all(self, own_children: Iterable[int] = ()) -> set[int]:
        """Stop the whole tree, then SIGKILL it and reap the adopted; returns the pids killed.

        Blocking (reads ``/proc``): call it from a worker thread.
        ``own_children`` are the daemon's direct children whose exit status
        somebody else (asyncio) collects; they are killed but never reaped here.
        """
        # The cell first: one write kills every process born in the command's cgroup.
        by_cell = self.cell.kill() if self.cell is not None else set()
        frozen: set[int] = set()
        for _ in range(_MAX_ROUNDS):
            snap = snapshot()
            new = self.members(snap) - frozen
            if not new:
                break
            for pid in new:
                _signal(pid, signal.SIGSTOP)
            frozen |= new
        for pid in frozen:
            _signal(pid, signal.SIGKILL)
        own = set(own_children)
        reap_adopted((frozen | by_cell) - own)
        # Members that had already exited (a double fork's middle process) wait as zombies
        # re-parented to us; reap the ones this tree can vouch for.
        me = os.getpid()
        reap_adopted(
            info.pid
            for info in (read_stat(pid) for pid in children_of(me))
            if info is not None
            and info.ppid == me
            and info.state == "Z"
            and info.pid not in own
            and (self.seen.get(info.pid) == info.starttime or self.root in (info.sid, info.pgid))
        )
        return frozen | by_cell

    def signal_all(self, sig: int) -> set[int]:
        """Send ``sig`` to every live member (a polite TERM/INT before a KILL)."""
        members = self.members(snapshot())
        for pid in members:
            _signal(pid, sig)
        return members


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def reap_adopted(pids: Iterable[int], attempts: int = 200) -> None:
    """``waitpid`` the given pids that are orphans re-parented to this (subreaper) process.

    Only adopted processes: a direct child's status belongs to whoever spawned it.
    """
    me = os.getpid()
    pending = set(pids)
    for _ in range(attempts):
        for pid in list(pending):
            info = read_stat(pid)
            if info is None or info.ppid != me:
                pending.discard(pid)
                continue
            if info.state in ("Z", "X"):
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
                pending.discard(pid)
        if not pending:
            return
        time.sleep(0.005)


class ZombieSweeper:
    """Reaps orphans re-parented to the (subreaper) daemon that nobody will ever wait for.

    A zombie child of the daemon is either a direct child whose owner (asyncio's
    child watcher, a ``Popen``) reaps it within moments, or an adopted orphan
    nobody owns. One that is still a zombie, with the same start time, at two
    consecutive sweeps is the latter; reaping it frees its pid.
    """

    def __init__(self) -> None:
        self._previous: set[tuple[int, int]] = set()

    def sweep(self) -> int:
        """Blocking (reads ``/proc``); returns how many were reaped."""
        me = os.getpid()
        now = {
            (info.pid, info.starttime)
            for info in (read_stat(pid) for pid in children_of(me))
            if info is not None and info.state == "Z"
        }
        stale = now & self._previous
        for pid, _start in stale:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        self._previous = now - stale
        return len(stale)
