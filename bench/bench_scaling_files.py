"""How ``file_list`` and ``file_search`` grow with the tree: 10k / 100k / 1M files.

Trees of 100-file directories (two levels), each file a few hundred bytes
with a rare marker in one file in ten thousand; built once and cached in the
temp dir. In-process (``Workspace``), median of a few calls after a warm-up,
so the page cache is warm (a repeated search is the common case).
``BENCH_SCALE=small``: 1k / 10k files.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from airlock.daemon.context import DaemonConfig
from airlock.daemon.protocol import FileListInput, FileSearchInput
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
    for size in sizes:
        root = tree(size)
        base = Path(tempfile.mkdtemp(prefix="al-bsf-"))
        ws = Workspace(DaemonConfig(workspace=root, artifacts_dir=base / "a", state_dir=base / "s"))
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
        finally:
            await ws.aclose()
    print(report.scaling_table("file_list (depth 3, limit 10,000)", "files", sizes, listing))
    print(report.scaling_table("file_search, rare pattern", "files", sizes, searching))


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
