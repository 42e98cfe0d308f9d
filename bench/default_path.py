"""The default path: ``apply_patch`` with the options a model gets, against ``git apply``.

500 chunks on a 50,000-line file (one line changed in each), as a model
would send them: successive edits of the same file (edit k renames
``compute_k(`` to ``compute_{k+1}(`` on the 500 lines), so every edit's
"before" is the previous edit's "after", never a cached rerun of one edit.
Baseline: ``git apply`` of the equivalent unified diff (a subprocess, as a
user would run it), measured in the same run. Rows:

- ``.txt`` over airlockd's socket: default options (diagnostics on: whitespace
  only applies), and ``diagnostics: false``;
- ``.py`` in-process (``Workspace.apply_patch``), checks git-diff + whitespace +
  syntax (types excluded, as the target says), and ``diagnostics: false``;
- ``.py`` types: every check, basedpyright on a 50,000-line file, reported apart.

Targets (issue 17): ``.txt`` default < 1.0x git apply; ``.py`` with syntax <= 1.3x.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from airlock.daemon.context import DaemonConfig
from airlock.daemon.diagnostics.service import DiagnosticsService
from airlock.daemon.protocol import ApplyPatchInput
from airlock.daemon.workspace import Workspace
from bench import report
from tests.fakes.daemon_harness import running_daemon

LINES = 50_000
CHUNKS = 500


def source(lines: int = LINES) -> list[str]:
    out: list[str] = []
    i = 0
    while len(out) < lines:
        out += [
            f"def handler_{i}(request, context):",
            '    """Handle one request."""',
            "    value = request.get('value')",
            "    if value is None:",
            "        return None",
            f"    result = compute_0(value, {i})",
            "    return result",
            "",
        ]
        i += 1
    return out[:lines]


def targets(lines: int = LINES, chunks: int = CHUNKS) -> list[int]:
    step = lines // chunks
    return [(k * step) // 8 * 8 + 5 for k in range(chunks)]


def version(base: list[str], k: int) -> list[str]:
    out = list(base)
    for t in targets(len(base)):
        out[t] = out[t].replace("compute_0(", f"compute_{k}(")
    return out


def patch_body(old: list[str], new: list[str]) -> str:
    chunks: list[str] = []
    for t in targets(len(old)):
        chunks.append("@@")
        chunks += [f" {x}" for x in old[t - 3 : t]]
        chunks += [f"-{old[t]}", f"+{new[t]}"]
        chunks += [f" {x}" for x in old[t + 1 : t + 4]]
    return "\n".join(chunks) + "\n"


def text(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def unified(work: Path, name: str, old: bytes, new: bytes) -> Path:
    (work / "a").mkdir(exist_ok=True)
    (work / "b").mkdir(exist_ok=True)
    (work / "a" / name).write_bytes(old)
    (work / "b" / name).write_bytes(new)
    diff = subprocess.run(
        ["git", "diff", "--no-index", "--no-prefix", f"a/{name}", f"b/{name}"],
        cwd=work,
        capture_output=True,
    ).stdout
    path = work / f"{name}.diff"
    path.write_bytes(diff)
    return path


def git_apply_ms(work: Path, name: str, versions: list[bytes]) -> list[float]:
    target = work / "apply"
    target.mkdir(exist_ok=True)
    times: list[float] = []
    for k in range(len(versions) - 1):
        diff = unified(work, name, versions[k], versions[k + 1])
        (target / name).write_bytes(versions[k])
        started = time.perf_counter()
        subprocess.run(["git", "apply", "-p1", str(diff)], cwd=target, check=True)
        times.append((time.perf_counter() - started) * 1000)
        assert (target / name).read_bytes() == versions[k + 1]
    return times


async def socket_ms(
    ws: Path, name: str, base: list[str], reps: int, diagnostics: bool
) -> list[float]:
    (ws / name).write_bytes(text(base))
    times: list[float] = []
    async with running_daemon(ws) as daemon, daemon.client() as client:
        for k in range(reps + 2):
            old, new = version(base, k), version(base, k + 1)
            patch = (
                f"*** Begin Patch\n*** Update File: {name}\n{patch_body(old, new)}*** End Patch\n"
            )
            args: dict[str, object] = {"patch": patch}
            if not diagnostics:
                args["diagnostics"] = False
            started = time.perf_counter()
            await client.call("apply_patch", args)
            if k >= 2:  # warm-up: imports, the worker's first full check
                times.append((time.perf_counter() - started) * 1000)
    return times


async def inprocess_ms(
    base_dir: Path, name: str, base: list[str], reps: int, checks: list[str] | None
) -> list[float]:
    ws_dir = base_dir / f"ws-{len(checks) if checks else 0}"
    ws_dir.mkdir()
    ws = Workspace(
        DaemonConfig(workspace=ws_dir, artifacts_dir=base_dir / "a", state_dir=base_dir / "s")
    )
    if checks:
        ws.ctx.diagnostics = DiagnosticsService(ws_dir, 120.0, edit_checks=checks)  # type: ignore[arg-type]
    (ws_dir / name).write_bytes(text(base))
    times: list[float] = []
    try:
        for k in range(reps + 2):
            old, new = version(base, k), version(base, k + 1)
            patch = (
                f"*** Begin Patch\n*** Update File: {name}\n{patch_body(old, new)}*** End Patch\n"
            )
            started = time.perf_counter()
            await ws.apply_patch(ApplyPatchInput(patch=patch, diagnostics=checks is not None))
            if k >= 2:
                times.append((time.perf_counter() - started) * 1000)
    finally:
        await ws.ctx.diag.aclose()
    return times


async def run(reps: int, types_reps: int) -> None:
    base_dir = Path(tempfile.mkdtemp(prefix="al-bdp-"))
    try:
        base = source()
        versions = [text(version(base, k)) for k in range(reps + 1)]
        git = git_apply_ms(base_dir, "big.txt", versions)
        git_ms = statistics.median(git)
        rows: list[list[object]] = []

        def row(label: str, times: list[float], target: str = "") -> None:
            ms = statistics.median(times)
            rows.append([label, len(times), ms, min(times), ms / git_ms])
            report.figure(label, ms, baseline=git_ms, baseline_name="git apply", target=target)

        ws = base_dir / "ws"
        ws.mkdir()
        row(
            ".txt socket, default options",
            await socket_ms(ws, "big.txt", base, reps, True),
            "< 1.0",
        )
        row(".txt socket, diagnostics: false", await socket_ms(ws, "off.txt", base, reps, False))
        syntax = ["git-diff", "whitespace", "syntax"]
        row(
            ".py in-process, syntax checks",
            await inprocess_ms(base_dir, "big.py", base, reps, syntax),
            "<= 1.3",
        )
        row(
            ".py in-process, diagnostics: false",
            await inprocess_ms(base_dir, "off.py", base, reps, None),
        )
        if types_reps:
            every = [*syntax, "types"]
            row(
                ".py in-process, every check (types)",
                await inprocess_ms(base_dir, "typed.py", base, types_reps, every),
            )
        rows.append(["git apply (subprocess)", len(git), git_ms, min(git), 1.0])
        print(f"apply_patch, {CHUNKS} chunks on a {LINES}-line file, successive edits (ms)")
        print(
            report.table(
                ["path", "edits", "median ms", "min ms", "vs git apply"], rows, title="default path"
            )
        )
        print("targets: .txt default < 1.0x git apply; .py with syntax checks <= 1.3x")
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)


def main() -> None:
    small = report.small()
    asyncio.run(run(reps=5 if small else 11, types_reps=0 if small else 2))


if __name__ == "__main__":
    main()
