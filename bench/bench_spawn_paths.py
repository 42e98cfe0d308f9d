"""What starting one program as the exec user costs, by the ways airlockd could do it.

Each way starts ``rg --files`` in a one-file directory (the shortest real
engine run), then a rare search over bench_exec_user's 2,000-file tree, as ``nobody`` from a process holding a daemon-sized heap
(``--ballast-mib``, 80 by default: ``fork`` copies page tables, so the
daemon's size matters), sequentially, in interleaved rounds:

- ``as root``: no switch at all (``asyncio`` subprocess, ``vfork``): the floor.
- ``setpriv``: ``vfork`` + exec of ``setpriv``, which switches and execs rg.
- ``user=``: ``subprocess``'s own ``user``/``group``/``extra_groups``
  (Python then ``fork``s the whole process instead of ``vfork``).
- ``launcher``: the long-lived launcher (daemon/procs/launcher.py) already
  running as the user; one request over its socketpair.

Needs root. Run: ``.venv/bin/python -m bench.bench_spawn_paths``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from airlock.daemon.identity import ExecUser
from airlock.daemon.procs.launcher import Launched, as_user, launcher_for
from bench.bench_exec_user import RARE, build, is_root
from bench.report import table

USER = "nobody"
ROUNDS = 7
STARTS = 30


async def _drain(proc: Launched | asyncio.subprocess.Process) -> None:
    assert proc.stdout is not None and proc.stderr is not None
    await asyncio.gather(proc.stdout.read(), proc.stderr.read())
    await proc.wait()
    if isinstance(proc, Launched):
        proc.release()


async def _pipes(argv: Sequence[str], cwd: str, who: dict[str, object]) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        process_group=0,
        **who,  # type: ignore[arg-type]
    )
    await _drain(proc)


def ways(user: ExecUser, argv: list[str], cwd: str) -> dict[str, Callable[[], Awaitable[None]]]:
    switched, _ = as_user(argv, user)

    async def root() -> None:
        await _pipes(argv, cwd, {})

    async def setpriv() -> None:
        await _pipes(switched, cwd, {})

    async def user_kwargs() -> None:
        await _pipes(argv, cwd, dict(user.spawn_kwargs()))

    async def launcher() -> None:
        proc = await launcher_for(user).spawn(
            argv, cwd=cwd, env=None, pass_fds=(), new_session=False
        )
        await _drain(proc)

    return {"as root": root, "setpriv": setpriv, "user=": user_kwargs, "launcher": launcher}


async def run(rounds: int, ballast_mib: int) -> None:
    ballast = bytearray(ballast_mib << 20)
    for i in range(0, len(ballast), 4096):  # touch every page, as a live heap is
        ballast[i] = 1
    rg = shutil.which("rg")
    if rg is None:
        print("bench_spawn_paths: no rg on PATH; nothing measured")
        return
    user = ExecUser.parse(USER)
    folder = Path(tempfile.mkdtemp(prefix="al-spawn-"))
    folder.chmod(0o755)
    (folder / "one").mkdir()
    (folder / "one" / "one.txt").write_text("x\n")
    (folder / "tree").mkdir()
    build(folder / "tree")  # bench_exec_user's workspace: 2,000 files, 3 with the marker
    for path in (folder / "one", folder / "one" / "one.txt"):
        os.chown(path, user.uid, user.gid)
    scenarios = {
        "`rg --files` in a one-file directory": ([rg, "--files"], folder / "one", STARTS),
        "`rg -l` of a rare marker over 2,000 files": ([rg, "-l", RARE], folder / "tree", 6),
    }
    for title, (argv, cwd, starts) in scenarios.items():
        await measure(title, ways(user, argv, str(cwd)), rounds, starts, ballast_mib)
    del ballast


async def measure(
    title: str,
    table_of: dict[str, Callable[[], Awaitable[None]]],
    rounds: int,
    starts: int,
    ballast_mib: int,
) -> None:
    for fn in table_of.values():  # warm up (and start the launcher)
        await fn()
    per: dict[str, list[float]] = {name: [] for name in table_of}
    for number in range(rounds):
        names = list(table_of) if number % 2 else list(table_of)[::-1]
        for name in names:
            times = []
            for _ in range(starts):
                start = time.perf_counter()
                await table_of[name]()
                times.append((time.perf_counter() - start) * 1000)
            per[name].append(statistics.median(times))
    floor = per["as root"]
    rows = [
        (
            name,
            statistics.median(v),
            statistics.median(v) - statistics.median(floor),
            statistics.median(a / b for a, b in zip(v, floor, strict=True)),
        )
        for name, v in per.items()
    ]
    print(
        f"{title}, as {USER}: {rounds} rounds x {starts}, medians; "
        f"{ballast_mib} MiB heap; cpu count {os.cpu_count()}"
    )
    print(table(["way", "ms per run", "over root", "/root"], rows))


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--ballast-mib", type=int, default=80)
    args = parser.parse_args(list(argv))
    if is_root("bench_spawn_paths"):
        asyncio.run(run(args.rounds, args.ballast_mib))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
