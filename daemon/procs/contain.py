"""What every agent command is born into: its cell, its OOM score, its process limit.

One :class:`Containment` per daemon decides how commands are tracked:

- ``cgroup``: each command gets a cgroup v2 directory of its own
  (:mod:`.cgroup`); every process it starts stays in it.
- ``tree`` (the fallback where the cgroup tree is not writable, as in a
  default Docker container): airlockd is a child subreaper, the sweep walks
  its ``/proc`` subtree and takes the session and process group the daemon
  created plus the recorded tree; and when the command runs as another user,
  the command also carries a *tag*: one supplementary group id of its own,
  from a range no file uses. Only a privileged process can drop a
  supplementary group, so ``env -i setsid -f`` and double forks keep it, and
  the sweep finds them by ``/proc/PID/status`` without catching them in a
  polling window.

Whatever the mode, the child is held for a moment between ``fork`` and
``exec`` (a step of the ``preexec_fn``) while a daemon thread, with the
daemon's privileges, moves it into its cgroup and raises its
``oom_score_adj``; the child lowers its own ``RLIMIT_NPROC``. Only then does
the agent's program run, so nothing it forks is born outside.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import select
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import rights
from . import cgroup

log = logging.getLogger("airlockd")

TRACKING_MODES = ("auto", "cgroup", "tree")
DEFAULT_MAX_PROCESSES = 4096
DAEMON_OOM_SCORE_ADJ = -500
CHILD_OOM_SCORE_ADJ = 500
_TAG_SPAN = 1 << 16
_GATE_WAIT_S = 10.0


class ContainmentError(ValueError):
    """``--exec-tracking cgroup`` was asked for and this machine cannot give it."""


def tag_range() -> range | None:
    """Group ids for command tags: 65,536 ids from a mapped range of at least 2**20, far
    from its ends (so far from any real group); None where no such range exists."""
    try:
        lines = Path("/proc/self/gid_map").read_text().splitlines()
    except OSError:
        return None
    best: tuple[int, int] | None = None
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and int(parts[2]) >= (1 << 20):
            start, count = int(parts[0]), int(parts[2])
            if best is None or count > best[1]:
                best = (start, count)
    if best is None:
        return None
    first = best[0] + best[1] - (1 << 20)
    return range(first, first + _TAG_SPAN)


@rights.as_daemon_call
def set_oom_score_adj(value: int, pid: int | str = "self") -> bool:
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w") as handle:
            handle.write(str(value))
        return True
    except OSError:
        return False


def read_groups(pid: int) -> set[int]:
    """The supplementary groups of ``pid`` (empty when it is gone)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"Groups:"):
                    return {int(x) for x in line.split()[1:]}
    except (OSError, ValueError):
        pass
    return set()


@dataclass
class Containment:
    """How this daemon contains commands; the inert default suits an embedding process."""

    mode: str = "tree"
    base: Path | None = None
    max_processes: int = 0
    child_oom: int | None = None
    tags: range | None = None
    _next: int = 0
    _cells: dict[str, Cell] = field(default_factory=dict)

    @classmethod
    def setup(cls, tracking: str, max_processes: int) -> Containment:
        """airlockd's own: lower its OOM score, pick the mode, make its cgroup subtree."""
        if tracking not in TRACKING_MODES:
            raise ContainmentError(
                f"--exec-tracking {tracking!r}: choose one of {', '.join(TRACKING_MODES)}"
            )
        if not set_oom_score_adj(DAEMON_OOM_SCORE_ADJ):
            log.warning(
                "could not lower airlockd's oom_score_adj to %d (needs CAP_SYS_RESOURCE); "
                "agent processes are still raised to %d",
                DAEMON_OOM_SCORE_ADJ,
                CHILD_OOM_SCORE_ADJ,
            )
        made = cls(max_processes=max_processes, child_oom=CHILD_OOM_SCORE_ADJ)
        if tracking != "tree":
            base, why = cgroup.make_base()
            if base is not None:
                made.mode, made.base = "cgroup", base
            elif tracking == "cgroup":
                raise ContainmentError(f"--exec-tracking cgroup: {why}")
            else:
                log.info("process tracking falls back to the /proc tree: %s", why)
        if made.mode == "tree":
            made.tags = tag_range()
        log.info(
            "agent commands are tracked by %s%s",
            "a cgroup each under " + str(made.base) if made.base else "the /proc tree",
            " and a group tag" if made.tags else "",
        )
        return made

    def cell(self, tree_id: str) -> Cell:
        """The container for one command (call before spawning it)."""
        made = Cell(self, tree_id)
        if self.mode == "cgroup" and self.base is not None:
            path = self.base / tree_id
            try:
                with rights.as_daemon():
                    path.mkdir()
                made.path = path
            except OSError as exc:
                log.warning("cgroup %s could not be made (%s); tracking it by tree", path, exc)
        elif self.tags is not None:
            made.tag = self.tags[self._next % len(self.tags)]
            self._next += 1
        self._cells[tree_id] = made
        return made

    def close(self) -> None:
        """The daemon stops: remove its cgroup subtree (after everything was killed)."""
        for made in list(self._cells.values()):
            made.close()
        if self.base is not None:
            cgroup.remove_tree(self.base)


@dataclass
class Cell:
    """One command's container: a cgroup directory, or a group tag, or neither (best effort)."""

    owner: Containment
    tree_id: str
    path: Path | None = None
    tag: int | None = None
    _gate: _Gate | None = None

    def popen_kwargs(self, base: dict[str, Any]) -> dict[str, Any]:
        """``base`` (the exec user's spawn kwargs) plus the tag and the gate's preexec step."""
        kwargs = dict(base)
        if self.tag is not None and "extra_groups" in kwargs:
            kwargs["extra_groups"] = [*kwargs["extra_groups"], self.tag]
        else:
            self.tag = None  # no user switch: the child could drop it, so it means nothing
        if self.path is None and self.owner.child_oom is None and not self.owner.max_processes:
            return kwargs
        self._gate = _Gate(self._place, _nproc_limits(self.owner.max_processes))
        kwargs["preexec_fn"] = self._gate.child_step
        return kwargs

    def spawned(self) -> None:
        """Popen returned (or failed): release the gate's descriptors and thread."""
        if self._gate is not None:
            self._gate.close()
            self._gate = None

    def _place(self, pid: int) -> None:
        """In the gate thread, while the child waits before ``exec``."""
        if self.path is not None:
            try:
                cgroup.move(self.path, pid)
            except OSError as exc:
                log.warning(
                    "could not move %d into %s (%s); tracking it by tree", pid, self.path, exc
                )
                self.close()
        if self.owner.child_oom is not None:
            set_oom_score_adj(self.owner.child_oom, pid)

    def members(self, candidates: dict[int, Any]) -> set[int]:
        """The pids of ``candidates`` that belong here by cgroup or tag (never by ancestry)."""
        if self.path is not None:
            return set(cgroup.pids(self.path))
        if self.tag is not None:
            return {pid for pid in candidates if self.tag in read_groups(pid)}
        return set()

    def kill(self) -> set[int]:
        """Blocking: SIGKILL the whole cgroup (nothing in tag or tree mode: the sweep does it)."""
        return cgroup.kill(self.path) if self.path is not None else set()

    def close(self) -> None:
        """Forget the cell; its cgroup directory goes once it is empty."""
        self.owner._cells.pop(self.tree_id, None)
        if self.path is not None:
            path, self.path = self.path, None
            with contextlib.suppress(OSError):
                path.rmdir()


def _nproc_limits(limit: int) -> tuple[int, int] | None:
    if limit <= 0:
        return None
    _soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    value = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    return (value, value)


class _Gate:
    """Holds a forked child before ``exec`` until a daemon thread has placed it.

    The child (``preexec_fn``, already the exec user) lowers its process limit,
    writes its pid and waits; the thread moves it and raises its OOM score with
    the daemon's privileges, then lets it go. The child waits at most
    :data:`_GATE_WAIT_S` (a thread that failed never wedges a spawn), and the
    thread sees end-of-file if the child died before writing.
    """

    def __init__(self, place: Callable[[int], None], nproc: tuple[int, int] | None) -> None:
        self.place = place
        self.nproc = nproc
        self.r_pid, self.w_pid = os.pipe()
        self.r_go, self.w_go = os.pipe()
        self.thread = threading.Thread(target=self._run, name="airlock-spawn-gate", daemon=True)
        self.thread.start()

    def child_step(self) -> None:
        """In the child between fork and exec: nothing here may take a lock or import."""
        if self.nproc is not None:
            # Lowering never fails for a valid pair; a raise here would abort the spawn.
            with contextlib.suppress(OSError, ValueError):
                resource.setrlimit(resource.RLIMIT_NPROC, self.nproc)
        with contextlib.suppress(OSError):
            os.write(self.w_pid, str(os.getpid()).encode())
            select.select([self.r_go], [], [], _GATE_WAIT_S)

    def _run(self) -> None:
        try:
            data = os.read(self.r_pid, 32)
            if data:
                try:
                    self.place(int(data))
                finally:
                    os.write(self.w_go, b"1")
        except (OSError, ValueError):
            log.exception("spawn gate failed")

    def close(self) -> None:
        os.close(self.w_pid)
        self.thread.join(_GATE_WAIT_S)
        for fd in (self.r_pid, self.r_go, self.w_go):
            os.close(fd)
