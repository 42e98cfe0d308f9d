"""What acting as the exec user costs: airlockd as root with and without --exec-user.

The three operations the contract bounds (at most +10%): ``file_read`` p50
(a 4 KiB file, sequential requests), ``apply_patch`` (a 20-hunk patch to a
5,000-line file, median; ``diagnostics: false``, since root may start type
checkers the exec user cannot, which would time those instead of the edit) and a rare search (a marker in 3 of 2,000 files,
``files_with_matches`` and ``count``, median). Daemons of this tree, all as
root, serve the same workspace (owned by the exec user) at the same time:

- ``root``: no ``--exec-user`` (the reference: nothing acts as the agent);
- ``exec user, per spawn``: ``--exec-user`` with every engine started through
  its own user switch (``AIRLOCK_ENGINE_LAUNCHER=off``: the way before the
  launcher);
- ``exec user``: ``--exec-user`` as shipped (engines through the launcher).

They are measured in interleaved rounds whose order rotates (and reverses),
so the machine's drifting load falls on all; a ratio is the median of per-round
ratios against ``root``. ``--baseline-tree DIR`` adds a daemon of another
tree (``git archive main``) with ``--exec-user``.
Without root (no user switch possible) it says so and measures nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pwd
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from airlock.client.daemon import DaemonClient
from airlock.daemon.procs.launcher import ENV_SWITCH
from bench.report import table
from tests.fakes.daemon_harness import running_daemon

USER = "nobody"
ROUNDS = 12
READS = 200
PATCHES = 6
SEARCHES = 6
FILES = 2000
RARE = "zqxjrare_marker"
REFERENCE = "root"


def build(ws: Path) -> None:
    (ws / "file.txt").write_text(("0123456789abcdef" * 4 + "\n") * 63)
    (ws / "big.py").write_text("".join(f"value_{i} = {i}\n" for i in range(5000)))
    src = ws / "src"
    for i in range(FILES):
        folder = src / f"m{i % 40}"
        folder.mkdir(parents=True, exist_ok=True)
        body = "".join(f"def f{j}(x):\n    return x + {j}\n" for j in range(30))
        if i in (7, 1000, 1999):
            body += f"# {RARE}\n"
        (folder / f"f{i}.py").write_text(body)
    user = pwd.getpwnam(USER)
    for folder, _dirs, files in os.walk(ws):
        os.chown(folder, user.pw_uid, user.pw_gid)
        for name in files:
            os.chown(os.path.join(folder, name), user.pw_uid, user.pw_gid)


def patch_for(round_no: int, flip: bool) -> str:
    """20 hunks that change lines to a round-specific value (and back on the next call)."""
    hunks = []
    for k in range(20):
        i = 100 + k * 200
        old, new = (f"value_{i} = {i}", f"value_{i} = {i}  # r{round_no}")
        if flip:
            old, new = new, old
        hunks.append(f"@@\n-{old}\n+{new}")
    return "*** Begin Patch\n*** Update File: big.py\n" + "\n".join(hunks) + "\n*** End Patch"


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return (time.perf_counter() - start) * 1000


async def one_round(c: DaemonClient, round_no: int) -> dict[str, float]:
    reads = [await timed(lambda: c.file_read(path="file.txt")) for _ in range(READS)]
    patches = []
    for k in range(PATCHES):
        text = patch_for(round_no, flip=bool(k % 2))
        patches.append(await timed(lambda t=text: c.apply_patch(patch=t, diagnostics=False)))
    files = [
        await timed(lambda: c.file_search(pattern=RARE, output_mode="files_with_matches"))
        for _ in range(SEARCHES)
    ]
    counts = [
        await timed(lambda: c.file_search(pattern=RARE, output_mode="count"))
        for _ in range(SEARCHES)
    ]
    return {
        "file_read p50": statistics.median(reads),
        "apply_patch": statistics.median(patches),
        "rare search, files": statistics.median(files),
        "rare search, count": statistics.median(counts),
    }


async def run(baseline: Path | None, rounds: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="al-bxu-"))
    base.chmod(0o755)
    ws = base / "ws"
    ws.mkdir()
    build(ws)
    as_user = ["--exec-user", USER]
    setups: dict[str, dict[str, Any]] = {
        REFERENCE: {},
        "exec user, per spawn": {"extra_args": as_user, "env": {ENV_SWITCH: "off"}},
        "exec user": {"extra_args": as_user},
    }
    if baseline is not None:
        tree = str(baseline.resolve())
        setups["baseline tree, exec user"] = {
            "extra_args": as_user,
            "env": {"PYTHONPATH": tree},
            "command_prefix": ("env", "-C", tree),
        }
    results: dict[str, list[dict[str, float]]] = {name: [] for name in setups}
    async with AsyncExitStack() as stack:
        clients = {}
        for name, kwargs in setups.items():
            d = await stack.enter_async_context(running_daemon(ws, **kwargs))
            clients[name] = await stack.enter_async_context(d.client())
        for c in clients.values():  # warm up
            await one_round(c, 0)
        for number in range(1, rounds + 1):
            # Every daemon takes every place in the order in turn: a place has a bias of its
            # own on a loaded machine (seen: +-50% on identical file_read paths).
            names = list(clients)[number % len(clients) :] + list(clients)[: number % len(clients)]
            if number // len(clients) % 2:
                names.reverse()
            for name in names:
                results[name].append(await one_round(clients[name], number))
    metrics = list(results[REFERENCE][0])
    rows = []
    for metric in metrics:
        ref = [r[metric] for r in results[REFERENCE]]
        row: list[object] = [metric, statistics.median(ref)]
        for name in list(setups)[1:]:
            mine = [r[metric] for r in results[name]]
            ratio = statistics.median(a / b for a, b in zip(mine, ref, strict=True))
            row += [statistics.median(mine), ratio]
        rows.append(row)
    headers = ["operation", f"{REFERENCE} ms"]
    for name in list(setups)[1:]:
        headers += [f"{name} ms", f"/{REFERENCE}"]
    print(
        f"airlockd as root, --exec-user {USER} or not: {rounds} interleaved rounds, medians "
        f"of per-round medians (cpu count {os.cpu_count()}); target: exec user <= 1.10"
    )
    print(table(headers, rows))


def is_root(bench: str) -> bool:
    """Whether users can be switched here; if not, says so (nothing is measured)."""
    if os.geteuid() == 0:
        return True
    print(f"{bench}: needs root to switch users; nothing measured")
    return False


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-tree", type=Path, help="also measure this source tree")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(list(argv))
    if is_root("bench_exec_user"):
        asyncio.run(run(args.baseline_tree, args.rounds))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
