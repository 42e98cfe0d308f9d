"""How ``file_read``, ``file_patch`` and ``apply_patch`` grow with the file: 10k / 100k / 1M lines.

One file per size (Python-like lines, ~30 bytes each); in-process
(``Workspace``), ``diagnostics: false`` so the tool's own cost is measured
(diagnostics scale with the edit, see ``bench_scaling_diagnostics``). Each
call: ``file_read`` of a 2,000-line page in the middle, ``file_patch`` of one
unique line in the middle, ``apply_patch`` of one chunk in the middle.
``BENCH_SCALE=small``: 1k / 10k / 100k lines.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from airlock.daemon.context import DaemonConfig
from airlock.daemon.protocol import ApplyPatchInput, FilePatchInput, FileReadInput
from airlock.daemon.workspace import Workspace
from bench import report


def content(lines: int) -> str:
    return "".join(f"    value_{i} = compute({i})\n" for i in range(lines))


async def median_ms(call: Callable[[int], Awaitable[object]], reps: int) -> float:
    samples: list[float] = []
    for rep in range(reps + 1):
        started = time.perf_counter()
        await call(rep)
        if rep:
            samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def run() -> None:
    sizes = report.steps([10_000, 100_000, 1_000_000], [1_000, 10_000, 100_000])
    costs: dict[str, list[float]] = {"file_read": [], "file_patch": [], "apply_patch": []}
    for size in sizes:
        base = Path(tempfile.mkdtemp(prefix="al-bsl-"))
        ws_dir = base / "ws"
        ws_dir.mkdir()
        ws = Workspace(
            DaemonConfig(workspace=ws_dir, artifacts_dir=base / "a", state_dir=base / "s")
        )
        try:
            (ws_dir / "big.py").write_text(content(size))
            mid = size // 2
            reps = 3 if size >= 1_000_000 else 7

            async def read(rep: int, ws: Workspace = ws, mid: int = mid) -> object:
                return await ws.file_read(FileReadInput(path="big.py", offset=mid, limit=2000))

            async def patch(rep: int, ws: Workspace = ws, mid: int = mid) -> object:
                old, new = f"value_{mid} = compute", f"value_{mid} = compute_{rep}"
                if rep:
                    old = f"value_{mid} = compute_{rep - 1}"
                return await ws.file_patch(
                    FilePatchInput(path="big.py", old_string=old, new_string=new, diagnostics=False)
                )

            async def apply(rep: int, ws: Workspace = ws, mid: int = mid) -> object:
                line = f"    value_{mid + 1} = compute({mid + 1})"
                old = line if rep == 0 else line.replace("compute(", f"compute_{rep - 1}(")
                new = line.replace("compute(", f"compute_{rep}(")
                body = (
                    f"*** Begin Patch\n*** Update File: big.py\n@@\n-{old}\n+{new}\n*** End Patch\n"
                )
                return await ws.apply_patch(ApplyPatchInput(patch=body, diagnostics=False))

            costs["file_read"].append(await median_ms(read, reps))
            costs["file_patch"].append(await median_ms(patch, reps))
            costs["apply_patch"].append(await median_ms(apply, reps))
        finally:
            await ws.aclose()
            shutil.rmtree(base, ignore_errors=True)
    print(
        report.scaling_table(
            "file_read, 2,000 lines from the middle", "lines", sizes, costs["file_read"]
        )
    )
    print(
        report.scaling_table(
            "file_patch, one line in the middle", "lines", sizes, costs["file_patch"]
        )
    )
    print(
        report.scaling_table(
            "apply_patch, one chunk in the middle", "lines", sizes, costs["apply_patch"]
        )
    )


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
