"""What putting one command into a cgroup of its own costs, step by step.

``exec`` gives every command a cgroup v2 directory (daemon/procs/cgroup.py,
contain.py): ``mkdir`` the cell, start the child, move it there (a write of
its pid to ``cgroup.procs`` while it waits before ``exec``), and ``rmdir``
after. The move is the suspect: migrating a task takes the cgroup
threadgroup lock for writing, which waits for an RCU grace period unless the
hierarchy is mounted with ``favordynmods``. This times each step on
``/bin/true``-like children (``sleep 30``, killed after) under a cgroup of its
own, sequentially; the spawn itself (``posix_spawn``) is shown for scale.

Needs root and a writable cgroup v2 tree (the one airlockd would use).
Run: ``.venv/bin/python -m bench.bench_cgroup_move``.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from airlock.daemon.procs import cgroup
from bench.report import table

STARTS = 40


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def measure(base: Path, starts: int) -> dict[str, list[float]]:
    steps: dict[str, list[float]] = {"mkdir": [], "spawn": [], "move": [], "kill+rmdir": []}
    for n in range(starts):
        t = time.perf_counter()
        cell = base / f"c{n}"
        cell.mkdir()
        steps["mkdir"].append(_ms(t))
        t = time.perf_counter()
        pid = os.posix_spawn("/bin/sleep", ["sleep", "30"], {})
        steps["spawn"].append(_ms(t))
        t = time.perf_counter()
        cgroup.move(cell, pid)
        steps["move"].append(_ms(t))
        t = time.perf_counter()
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        cell.rmdir()
        steps["kill+rmdir"].append(_ms(t))
    return steps


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=STARTS)
    args = parser.parse_args(list(argv))
    base, why = cgroup.make_base()
    if base is None:
        print(f"bench_cgroup_move: no writable cgroup v2 tree ({why}); nothing measured")
        return
    try:
        steps = measure(base, args.starts)
    finally:
        cgroup.remove_tree(base)
    options = _mount_options(base)
    rows = [(name, statistics.median(v), max(v), sum(v) / len(v)) for name, v in steps.items()]
    print(f"{args.starts} commands, each in a cgroup of its own under {base} (mount: {options})")
    print(table(["step", "median ms", "max ms", "mean ms"], rows))


def _mount_options(path: Path) -> str:
    best = ("", "")
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if (
            fields[2] == "cgroup2"
            and str(path).startswith(fields[1])
            and len(fields[1]) > len(best[0])
        ):
            best = (fields[1], fields[3])
    return best[1] or "unknown"


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
