"""Added latency of post-edit diagnostics on ``file_patch`` of 2,000-line files.

Each row patches one function of a 2,000-line Python or TypeScript file,
in-process through ``Workspace.file_patch`` (the socket adds the same constant
to every row). The baseline row is the same edit with ``diagnostics: false``,
measured in the same run. Rows:

- off           diagnostics: false (the floor)
- syntax        git-diff + whitespace + syntax (no type checker)
- types         every check; steady state, where edit N's result is edit N+1's baseline
- types, cold   every check, the file touched by someone else before each edit,
                so the baseline runs the type checker too
- types, start  the first edit in a fresh workspace (one sample): worker and node
                start-up included; Python answers through the basedpyright CLI, since a
                language server is only started for files checked more than twice

Run alone: ``.venv/bin/python -m bench.bench_diagnostics [--edits N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from airlock.daemon.context import DaemonConfig
from airlock.daemon.diagnostics.service import DiagnosticsService
from airlock.daemon.diagnostics.types import (
    TYPESCRIPT_ENV,
    basedpyright_argv,
    find_typescript,
    node_executable,
)
from airlock.daemon.protocol import FilePatchInput, FileWriteInput
from airlock.daemon.workspace import Workspace
from bench import report
from bench.report import percentile, table
from tests.fakes.toolchains import npm_modules

TYPESCRIPT_VERSION = "5.9.3"
MODES = ("off", "syntax", "types", "types, cold")
FIRST: dict[str, float] = {}


def python_file() -> str:
    return "".join(f"def f_{k}(x: int) -> int:\n    return x + {k}\n\n" for k in range(667))


def python_edit(k: int) -> tuple[str, str]:
    old = f"def f_{k}(x: int) -> int:\n    return x + {k}\n"
    return old, old.replace(f"x + {k}\n", f"x + {k} + 1\n")


def typescript_file() -> str:
    return "".join(
        f"export function f_{k}(x: number): number {{\n  return x + {k};\n}}\n\n"
        for k in range(500)
    )


def typescript_edit(k: int) -> tuple[str, str]:
    old = f"export function f_{k}(x: number): number {{\n  return x + {k};\n"
    return old, old.replace(f"x + {k};", f"x + {k} + 1;")


def ensure_typescript() -> Path | None:
    """typescript@5.9.3 from the tests' toolchain cache (installed with npm on first use), or None."""
    pinned = os.environ.get(TYPESCRIPT_ENV)
    if pinned:
        return Path(pinned)
    modules, _ = npm_modules(
        f"typescript-{TYPESCRIPT_VERSION}", [f"typescript@{TYPESCRIPT_VERSION}"]
    )
    package = None if modules is None else modules / "node_modules" / "typescript"
    return (
        package if package is not None and (package / "lib" / "typescript.js").is_file() else None
    )


async def measure(
    name: str, content: str, edit: Callable[[int], tuple[str, str]], mode: str, edits: int
) -> list[float]:
    base = Path(tempfile.mkdtemp(prefix="al-bd-"))
    ws_dir = base / "ws"
    ws_dir.mkdir()
    ws = Workspace(DaemonConfig(workspace=ws_dir, artifacts_dir=base / "a", state_dir=base / "s"))
    if mode == "syntax":
        ws.ctx.diagnostics = DiagnosticsService(
            ws_dir, 60.0, edit_checks=["git-diff", "whitespace", "syntax"]
        )
    try:
        await ws.file_write(FileWriteInput(path=name, content=content, diagnostics=False))
        samples: list[float] = []
        for k in range(edits + 2):
            # Edit 0 is a fresh workspace's first edit (reported as "types, start"); then
            # the language server is started and edit 1 waits for it; 2.. are measured.
            if k == 1:
                ws.ctx.diag.checkers.pyright.start_after = 0
                ws.ctx.diag.checkers.pyright.wait_for_start = True
            old, new = edit(k)
            if mode == "types, cold":
                with open(ws_dir / name, "a") as handle:
                    handle.write(f"\n// touched {k}\n" if name.endswith(".ts") else f"\n# {k}\n")
            started = time.perf_counter()
            await ws.file_patch(
                FilePatchInput(path=name, old_string=old, new_string=new, diagnostics=mode != "off")
            )
            elapsed = (time.perf_counter() - started) * 1000
            if k >= 2:
                samples.append(elapsed)
            elif k == 0:
                FIRST[f"{name} {mode}"] = elapsed
        return samples
    finally:
        await ws.ctx.diag.aclose()
        shutil.rmtree(base, ignore_errors=True)


async def run(edits: int) -> None:
    typescript = ensure_typescript()
    if typescript is not None:
        os.environ[TYPESCRIPT_ENV] = str(typescript)
    files = [
        ("mod.py", python_file(), python_edit, basedpyright_argv() is not None),
        (
            "mod.ts",
            typescript_file(),
            typescript_edit,
            typescript is not None and node_executable() is not None,
        ),
    ]
    rows: list[list[object]] = []
    for name, content, edit, typed in files:
        assert content.count("\n") >= 2000
        floor: float | None = None
        for mode in MODES:
            if mode.startswith("types") and not typed:
                rows.append([name, mode, "-", "-", "-", "-", "checker not installed"])
                continue
            samples = await measure(name, content, edit, mode, edits)
            p50, p90 = percentile(samples, 50), percentile(samples, 90)
            if mode == "off":
                floor = p50
            assert floor is not None
            rows.append([name, mode, len(samples), p50, p90, p50 - floor, f"{p50 / floor:.1f}x"])
            if mode == "types":
                first = FIRST[f"{name} {mode}"]
                rows.append(
                    [name, "types, start", 1, first, first, first - floor, f"{first / floor:.1f}x"]
                )
    print("file_patch of a 2,000-line file, in-process (milliseconds)")
    print(
        table(
            ["file", "diagnostics", "edits", "p50 ms", "p90 ms", "added p50 ms", "vs off"],
            rows,
        )
    )
    if typescript is not None:
        print(f"typescript: {typescript}; basedpyright: {basedpyright_argv()}")
    print(
        f"typescript found for a workspace file: {find_typescript(Path.cwd() / 'x.ts', node_executable())}"
    )


def main(argv: list[str] | None = None) -> None:
    from bench import default_path

    default_path.main()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--edits", type=int, default=5 if report.small() else 20)
    args = parser.parse_args(argv if argv is not None else [])
    asyncio.run(run(args.edits))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
