"""How post-edit diagnostics grow with the number of changed files: 10 / 100 / 1,000.

One edit touching N Python files of 50 lines each in a git repository (all
tracked): the editing tools' tracker (baseline, write, re-check, subtraction)
with git-diff, whitespace and syntax (types excluded: they are one checker
process per project whatever N is; see bench_diagnostics). In-process service,
real git and the real worker process. ``BENCH_SCALE=small``: 10 / 100.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from airlock.daemon.diagnostics.service import DiagnosticsService
from airlock.daemon.paths import ResolvedPath
from bench import report


def body(k: int, version: int) -> str:
    return "".join(f"def f_{k}_{i}(x):\n    return x + {i + version}\n\n" for i in range(17))


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo)}
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)


async def one(count: int) -> float:
    base = Path(tempfile.mkdtemp(prefix="al-bsdg-"))
    repo = base / "ws"
    (repo / "src").mkdir(parents=True)
    try:
        for k in range(count):
            (repo / "src" / f"m{k}.py").write_text(body(k, 0))
        git(repo, "init", "-q", ".")
        git(repo, "add", ".")
        git(repo, "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qm", "c")
        svc = DiagnosticsService(repo, 300.0, edit_checks=["git-diff", "whitespace", "syntax"])
        paths = [
            ResolvedPath(repo / "src" / f"m{k}.py", repo, f"src/m{k}.py") for k in range(count)
        ]
        samples: list[float] = []
        try:
            for version in range(1, 4):
                started = time.perf_counter()
                tracker = svc.tracker(paths)
                await tracker.start()
                await tracker.before_write()
                for k in range(count):
                    (repo / "src" / f"m{k}.py").write_text(body(k, version) + "x = 1 \n")
                await tracker.finish()
                samples.append((time.perf_counter() - started) * 1000)
        finally:
            await svc.aclose()
        return min(samples[1:]) if len(samples) > 1 else samples[0]
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def run() -> None:
    sizes = report.steps([10, 100, 1000], [10, 100])
    costs = [await one(n) for n in sizes]
    print(
        report.scaling_table(
            "edit diagnostics (git-diff, whitespace, syntax) by changed files",
            "files",
            sizes,
            costs,
        )
    )


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
