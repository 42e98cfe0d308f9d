"""The default path: ``apply_patch`` with the options a model gets, against ``git apply``.

500 chunks on a 50,000-line file (one line changed in each), as a model
would send them: successive edits of the same file (edit k renames
``compute_k(`` to ``compute_{k+1}(`` on the 500 lines), so every edit's
"before" is the previous edit's "after", never a cached rerun of one edit.
Baseline: ``git apply`` of the equivalent unified diff (a subprocess, as a
user would run it), measured in the same run and interleaved with the rows
(edit k goes through every row before edit k+1), so a busy machine slows
every row alike. Rows:

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
from contextlib import AsyncExitStack
from pathlib import Path

from airlock.client.daemon import DaemonClient
from airlock.daemon.context import DaemonConfig
from airlock.daemon.diagnostics.service import DiagnosticsService
from airlock.daemon.protocol import ApplyPatchInput
from airlock.daemon.workspace import Workspace
from bench import report
from tests.fakes.daemon_harness import running_daemon

LINES = 50_000
CHUNKS = 500


def source(lines: int = LINES, callee: str = "compute_0") -> list[str]:
    """Python-like code: repetitive lines (returns, blanks) so matching has real work."""
    out: list[str] = []
    i = 0
    while len(out) < lines:
        out += [
            f"def handler_{i}(request, context):",
            '    """Handle one request."""',
            "    value = request.get('value')",
            "    if value is None:",
            "        return None",
            f"    result = {callee}(value, {i})",
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
    work.mkdir(exist_ok=True)
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


class Row:
    """One way of applying edit ``k``; ``step`` returns its wall time in ms."""

    def __init__(self, label: str, target: str = "") -> None:
        self.label = label
        self.target = target
        self.times: list[float] = []

    async def step(self, k: int) -> float:
        raise NotImplementedError


class GitApply(Row):
    """``git apply`` of edit k's unified diff, a subprocess as a user would run it."""

    def __init__(self, work: Path, name: str, versions: list[bytes]) -> None:
        super().__init__("git apply (subprocess)")
        self.target_dir = work / "apply"
        self.target_dir.mkdir(exist_ok=True)
        self.name = name
        self.versions = versions
        self.diffs = [
            unified(work / f"diff-{k}", name, versions[k], versions[k + 1])
            for k in range(len(versions) - 1)
        ]

    async def step(self, k: int) -> float:
        (self.target_dir / self.name).write_bytes(self.versions[k])
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            "git", "apply", "-p1", str(self.diffs[k]), cwd=self.target_dir
        )
        await proc.wait()
        ms = (time.perf_counter() - started) * 1000
        assert proc.returncode == 0
        assert (self.target_dir / self.name).read_bytes() == self.versions[k + 1]
        return ms


class OverSocket(Row):
    """airlockd's ``apply_patch`` over its Unix socket (a real daemon subprocess)."""

    def __init__(self, label: str, client: DaemonClient, name: str, diagnostics: bool) -> None:
        super().__init__(label, "< 1.0" if diagnostics else "")
        self.client, self.name, self.diagnostics = client, name, diagnostics

    async def step(self, k: int) -> float:
        args: dict[str, object] = {"patch": patches[k].replace("@NAME@", self.name)}
        if not self.diagnostics:
            args["diagnostics"] = False
        started = time.perf_counter()
        await self.client.call("apply_patch", args)
        return (time.perf_counter() - started) * 1000


class InProcess(Row):
    """``Workspace.apply_patch`` in this process, with a chosen set of edit checks."""

    def __init__(
        self, label: str, ws: Workspace, name: str, checks: bool, target: str = ""
    ) -> None:
        super().__init__(label, target)
        self.ws, self.name, self.checks = ws, name, checks

    async def step(self, k: int) -> float:
        req = ApplyPatchInput(
            patch=patches[k].replace("@NAME@", self.name), diagnostics=self.checks
        )
        started = time.perf_counter()
        await self.ws.apply_patch(req)
        return (time.perf_counter() - started) * 1000


patches: list[str] = []
"""Edit k of the run, with ``@NAME@`` for the file's name (built once, outside the timing)."""

SYNTAX = ["git-diff", "whitespace", "syntax"]


async def _workspace(
    stack: AsyncExitStack, base_dir: Path, tag: str, checks: list[str] | None
) -> tuple[Workspace, Path]:
    ws_dir = base_dir / f"ws-{tag}"
    ws_dir.mkdir()
    ws = Workspace(
        DaemonConfig(
            workspace=ws_dir, artifacts_dir=base_dir / f"a-{tag}", state_dir=base_dir / f"s-{tag}"
        )
    )
    stack.push_async_callback(ws.aclose)
    if checks:
        ws.ctx.diagnostics = DiagnosticsService(ws_dir, 120.0, edit_checks=checks)  # type: ignore[arg-type]
        stack.push_async_callback(ws.ctx.diagnostics.aclose)
    return ws, ws_dir


async def run(reps: int, types_reps: int) -> None:
    base_dir = Path(tempfile.mkdtemp(prefix="al-bdp-"))
    try:
        base = source()
        lines = [version(base, k) for k in range(reps + 3)]
        versions = [text(v) for v in lines]
        patches.clear()
        patches.extend(
            f"*** Begin Patch\n*** Update File: @NAME@\n{patch_body(lines[k], lines[k + 1])}"
            "*** End Patch\n"
            for k in range(reps + 2)
        )
        async with AsyncExitStack() as stack:
            ws_sock = base_dir / "ws-socket"
            ws_sock.mkdir()
            for name in ("big.txt", "off.txt"):
                (ws_sock / name).write_bytes(versions[0])
            daemon = await stack.enter_async_context(running_daemon(ws_sock))
            client = await stack.enter_async_context(daemon.client())
            py_ws, py_dir = await _workspace(stack, base_dir, "py", SYNTAX)
            off_ws, off_dir = await _workspace(stack, base_dir, "off", None)
            (py_dir / "big.py").write_bytes(versions[0])
            (off_dir / "off.py").write_bytes(versions[0])
            git = GitApply(base_dir, "big.txt", versions)
            rows: list[Row] = [
                OverSocket(".txt socket, default options", client, "big.txt", True),
                OverSocket(".txt socket, diagnostics: false", client, "off.txt", False),
                InProcess(".py in-process, syntax checks", py_ws, "big.py", True, "<= 1.3"),
                InProcess(".py in-process, diagnostics: false", off_ws, "off.py", False),
                git,
            ]
            # Interleaved: edit k goes through every row before edit k+1 does, so load
            # from other processes hits each row alike. The first two edits warm up
            # (imports, the worker's first full check).
            for k in range(reps + 2):
                for row in rows:
                    ms = await row.step(k)
                    if k >= 2:
                        row.times.append(ms)
            if types_reps:
                typed_ws, typed_dir = await _workspace(stack, base_dir, "typed", [*SYNTAX, "types"])
                (typed_dir / "typed.py").write_bytes(versions[0])
                typed = InProcess(".py in-process, every check (types)", typed_ws, "typed.py", True)
                for k in range(types_reps + 2):
                    ms = await typed.step(k)
                    if k >= 2:
                        typed.times.append(ms)
                rows.insert(-1, typed)
        git_ms = statistics.median(git.times)
        table_rows: list[list[object]] = []
        for row in rows:
            ms = statistics.median(row.times)
            table_rows.append([row.label, len(row.times), ms, min(row.times), ms / git_ms])
            if row is not git:
                report.figure(
                    row.label, ms, baseline=git_ms, baseline_name="git apply", target=row.target
                )
        print(f"apply_patch, {CHUNKS} chunks on a {LINES}-line file, successive edits (ms)")
        print(
            report.table(
                ["path", "edits", "median ms", "min ms", "vs git apply"],
                table_rows,
                title="default path",
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
