"""How ``file_list`` and ``file_search`` grow with the tree: 10k / 100k / 1M files.

Trees of 100-file directories (two levels), each file a few hundred bytes
with a rare marker in one file in ten thousand; built once and cached in the
temp dir. In-process (``Workspace``), median of a few calls after a warm-up,
so the page cache is warm (a repeated search is the common case). The search
table carries raw ``rg`` (the binary the daemon resolved, the daemon's own
flags) at each size as its baseline, so the daemon's share is visible.
``BENCH_SCALE=small``: 1k / 10k files.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from airlock.daemon.context import DaemonConfig
from airlock.daemon.protocol import FileListInput, FileSearchInput
from airlock.daemon.search.engine import resolve_engine
from airlock.daemon.search.query import Query
from airlock.daemon.search.rg import rg_argv
from airlock.daemon.workspace import Workspace
from bench import report

PER_DIR = 100
RARE = "zqxj_scaling_marker"


def tree(files: int) -> Path:
    root = Path(tempfile.gettempdir()) / f"airlock-bench-scaling-files-{files}"
    done = root / ".complete"
    if done.exists():
        return root
    for i in range(files):
        folder = root / f"d{i // (PER_DIR * PER_DIR):03d}" / f"e{(i // PER_DIR) % PER_DIR:03d}"
        if i % PER_DIR == 0:
            folder.mkdir(parents=True, exist_ok=True)
        body = f"line one of file {i}\nvalue = {i * 7}\n" * 4
        if i % 10_000 == 1234:
            body += f"{RARE} {i}\n"
        (folder / f"f{i % PER_DIR:03d}.txt").write_text(body)
    done.write_text("ok")
    return root


async def measure(ws: Workspace, call: object, reps: int) -> float:
    samples: list[float] = []
    for rep in range(reps + 1):
        started = time.perf_counter()
        await call()  # type: ignore[operator]
        if rep:
            samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def run() -> None:
    sizes = report.steps([10_000, 100_000, 1_000_000], [1_000, 10_000])
    listing: list[float] = []
    searching: list[float] = []
    raw: list[float] = []
    for size in sizes:
        root = tree(size)
        base = Path(tempfile.mkdtemp(prefix="al-bsf-"))
        # The daemon's default 30 s search limit is a deployment choice; this table
        # measures how the work grows, so a 1M-file search on a busy machine may take longer.
        ws = Workspace(
            DaemonConfig(
                workspace=root,
                artifacts_dir=base / "a",
                state_dir=base / "s",
                search_timeout_s=600.0,
            )
        )
        try:
            reps = 3 if size >= 1_000_000 else 5
            listing.append(
                await measure(
                    ws,
                    lambda ws=ws: ws.file_list(FileListInput(path=".", depth=3, limit=10_000)),
                    reps,
                )
            )
            searching.append(
                await measure(
                    ws,
                    lambda ws=ws: ws.file_search(
                        FileSearchInput(pattern=RARE, output_mode="files_with_matches")
                    ),
                    reps,
                )
            )
            raw.append(await raw_rg_ms(ws, root, reps))
        finally:
            await ws.aclose()
    print(report.scaling_table("file_list (depth 3, limit 10,000)", "files", sizes, listing))
    print(report.scaling_table("file_search, rare pattern", "files", sizes, searching))
    print(report.scaling_table("raw rg, same flags (baseline)", "files", sizes, raw))
    rows = [
        [n, ours, base, ours / base] for n, ours, base in zip(sizes, searching, raw, strict=True)
    ]
    print(
        report.table(["files", "file_search ms", "raw rg ms", "ratio"], rows, title="search vs rg")
    )
    for n, ours, base in zip(sizes, searching, raw, strict=True):
        report.figure(f"file_search rare, {n} files", ours, baseline=base, baseline_name="raw rg")


async def raw_rg_ms(ws: Workspace, root: Path, reps: int) -> float:
    """Raw rg with the argv the daemon builds for the same query (its binary, its flags)."""
    engine = await resolve_engine(ws.ctx)
    assert engine is not None and engine.engine == "rg", "no rg: install ripgrep"
    query = Query(
        pattern=RARE,
        fixed=False,
        case_insensitive=False,
        glob=None,
        type=None,
        mode="files_with_matches",
        context=0,
        include_ignored=False,
    )
    argv = rg_argv(engine.path, query, ".", sort=False)
    samples: list[float] = []
    for rep in range(reps + 1):
        started = time.perf_counter()
        subprocess.run(argv, cwd=root, capture_output=True, check=False)
        if rep:
            samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
