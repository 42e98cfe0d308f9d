"""The ``types`` check: basedpyright for Python, the TypeScript compiler for TS/TSX.

This module groups files by checker and project and runs basedpyright's CLI;
``pyright_lsp.py`` keeps basedpyright running, ``typescript.py`` the compiler.

Both run as subprocesses (never in the daemon's event loop) under the
service's deadline. Each runs only when installed; otherwise the check is
skipped with the reason and an install hint. Files are grouped so that one
checker process serves every file of one project (one basedpyright per
project root, one node per tsconfig).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..protocol import Severity
from ..rights import as_daemon_call
from .group import TypeGroup
from .languages import language_of
from .model import MAX_FINDINGS_PER_FILE, Finding, finding
from .procs import READ_SCOPE, CheckUnavailable, RunAs, run_bounded
from .pyright_lsp import (
    NO_RULE,
    LspUnavailable,
    PyrightServers,
    clean_message,
)
from .typescript import (
    TYPESCRIPT_ENV,
    TypeScriptCheckers,
    find_typescript,
    node_executable,
    run_typescript,
)

CHECK = "types"

PYRIGHT_NO_RULE = NO_RULE
"""The code of a basedpyright finding without a rule: mostly its own parse errors."""
_PY_MARKERS = ("pyrightconfig.json", "pyproject.toml", "setup.cfg", "setup.py", ".git")
_TS_CONFIGS = ("tsconfig.json", "jsconfig.json")
_PY_SEVERITY: dict[str, Severity] = {"error": "error", "warning": "warning", "information": "info"}


@dataclass
class TypePlan:
    groups: list[TypeGroup] = field(default_factory=list)
    unavailable: dict[str, list[str]] = field(default_factory=dict)  # reason -> displays
    not_applicable: list[str] = field(default_factory=list)


def _ancestors(path: Path) -> list[Path]:
    return [path.parent, *path.parent.parents]


def _nearest(path: Path, names: Sequence[str]) -> Path | None:
    for folder in _ancestors(path):
        for name in names:
            candidate = folder / name
            if candidate.exists():
                return candidate
    return None


@as_daemon_call  # the daemon's own install, which the exec user may not be able to see
def basedpyright_argv() -> list[str] | None:
    """basedpyright on PATH, else beside the daemon's interpreter, else pyright."""
    for name in ("basedpyright",):
        found = shutil.which(name) or _beside_interpreter(name)
        if found:
            return [found]
    found = shutil.which("pyright")
    return [found] if found else None


def _beside_interpreter(name: str) -> str | None:
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None


def _python_root(path: Path) -> Path:
    marker = _nearest(path, _PY_MARKERS)
    return marker.parent if marker is not None else path.parent


def _has_pyright_config(root: Path) -> bool:
    if (root / "pyrightconfig.json").is_file():
        return True
    pyproject = root / "pyproject.toml"
    try:
        text = pyproject.read_text("utf-8", "replace") if pyproject.is_file() else ""
    except OSError:
        return False
    return "[tool.pyright" in text or "[tool.basedpyright" in text


def _project_python(root: Path) -> Path | None:
    for venv in (".venv", "venv"):
        candidate = root / venv / "bin" / "python"
        if candidate.exists():
            return candidate
    return None


def checker_env(run_as: RunAs, workspace: Path | None) -> dict[str, str]:
    """The environment of a type checker: in read scope, PATH without any folder of the
    workspace, so a checker looking up ``python`` or ``node`` cannot find the agent's."""
    env = run_as.env()
    if not run_as.workspace_code and workspace is not None:
        kept = [
            entry
            for entry in env.get("PATH", os.defpath).split(os.pathsep)
            if entry and os.path.isabs(entry) and not _inside(Path(entry), workspace)
        ]
        env["PATH"] = os.pathsep.join(kept)
    return env


def _inside(path: Path, folder: Path) -> bool:
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):
        return True
    return resolved == folder or folder in resolved.parents


def _trusted_python(env: Mapping[str, str]) -> Path:
    """An interpreter outside the workspace: ``python3`` on the (sanitised) PATH, else ours."""
    found = shutil.which("python3", path=env.get("PATH", ""))
    return Path(found) if found else Path(sys.executable)


def plan_types(
    files: Mapping[Path, str], run_as: RunAs = READ_SCOPE, workspace: Path | None = None
) -> TypePlan:
    """Group ``files`` (real -> display) by checker and project. Blocking: run in a thread.

    Read scope never picks a program of the workspace: no project interpreter
    for basedpyright, no ``node_modules/typescript`` of the project.
    """
    plan = TypePlan()
    groups: dict[tuple[str, Path, Path | None, Path | None], TypeGroup] = {}
    key: tuple[str, Path, Path | None, Path | None]
    env = checker_env(run_as, workspace)
    pyright = basedpyright_argv()
    node = node_executable()
    if workspace is not None and not run_as.workspace_code:
        pyright = None if pyright is None or _inside(Path(pyright[0]), workspace) else pyright
        node = None if node is None or _inside(Path(node), workspace) else node
    for real, display in files.items():
        if not real.is_file():
            continue
        language = language_of(real)
        if language == "python":
            if pyright is None:
                plan.unavailable.setdefault(
                    "basedpyright is not installed (pip install basedpyright)", []
                ).append(display)
                continue
            root = _python_root(real)
            key = ("basedpyright", root, None, None)
            # basedpyright runs the interpreter it is given, and finds a project's .venv by
            # itself when given none: read scope always names a trusted one.
            python = _project_python(root) if run_as.workspace_code else _trusted_python(env)
            group = groups.setdefault(
                key, TypeGroup("basedpyright", root, python=python, run_as=run_as, env=env)
            )
            group.config = root / "pyrightconfig.json" if _has_pyright_config(root) else None
            group.files[real] = display
        elif language in ("typescript", "tsx", "javascript"):
            config = _nearest(real, _TS_CONFIGS)
            if language == "javascript" and config is None:
                plan.not_applicable.append(display)  # plain JS: nothing declares it typed
                continue
            if node is None:
                plan.unavailable.setdefault("node is not installed", []).append(display)
                continue
            typescript = find_typescript(real, node, project=run_as.workspace_code)
            if typescript is not None and workspace is not None and not run_as.workspace_code:
                typescript = None if _inside(typescript, workspace) else typescript
            if (
                typescript is None
                and not run_as.workspace_code
                and find_typescript(real, node, project=True) is not None
            ):
                plan.unavailable.setdefault(
                    "read scope runs no program of the workspace (its node_modules/typescript "
                    f"included) and no pinned typescript is set ({TYPESCRIPT_ENV}); use a "
                    "write-scope token or pin one",
                    [],
                ).append(display)
                continue
            if typescript is None:
                plan.unavailable.setdefault(
                    "typescript is not installed (npm install --save-dev typescript, or set "
                    f"{TYPESCRIPT_ENV} to a pinned typescript package)",
                    [],
                ).append(display)
                continue
            cwd = config.parent if config is not None else real.parent
            key = ("typescript", cwd, config, typescript)
            group = groups.setdefault(
                key,
                TypeGroup(
                    "typescript", cwd, config=config, typescript=typescript, run_as=run_as, env=env
                ),
            )
            group.files[real] = display
        else:
            plan.not_applicable.append(display)
    plan.groups = list(groups.values())
    return plan


class Checkers:
    """The long-lived type checkers a service owns: TypeScript workers, pyright servers."""

    def __init__(self, *, pyright_server: bool = True) -> None:
        self.typescript = TypeScriptCheckers()
        self.pyright = PyrightServers()
        self.pyright_server = pyright_server
        """False: always the basedpyright CLI (one process per check)."""

    async def aclose(self) -> None:
        await self.typescript.aclose()
        await self.pyright.aclose()


async def run_group(group: TypeGroup, timeout_s: float, checkers: Checkers) -> list[Finding]:
    """Run one group's checker; raises CheckTimeout / CheckUnavailable / WorkerGone."""
    if group.tool == "basedpyright":
        cli = basedpyright_argv()
        if cli is None:
            raise CheckUnavailable("basedpyright is not installed (pip install basedpyright)")
        if checkers.pyright_server and group.run_as.workspace_code:
            try:
                return await checkers.pyright.check(
                    cli,
                    group.cwd,
                    group.python,
                    group.files,
                    group.config is None,
                    timeout_s,
                    run_as=group.run_as,
                )
            except LspUnavailable:
                pass  # the CLI below gives the same answer, only slower
        return await _run_pyright(group, timeout_s)
    return await run_typescript(group, timeout_s, checkers.typescript)


async def _run_pyright(group: TypeGroup, timeout_s: float) -> list[Finding]:
    argv = basedpyright_argv()
    if argv is None:
        raise CheckUnavailable("basedpyright is not installed (pip install basedpyright)")
    argv = [*argv, "--outputjson"]
    if group.config is None:
        argv += ["--level", "error"]  # no project settings: errors only, not style advice
    if group.python is not None:
        argv += ["--pythonpath", str(group.python)]
    argv += [str(f) for f in group.files]
    done = await run_bounded(
        argv, cwd=group.cwd, timeout_s=timeout_s, env=group.env, run_as=group.run_as
    )
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        raise CheckUnavailable(
            "basedpyright failed: "
            + (done.stderr or done.stdout).decode("utf-8", "replace").strip()[:300]
        ) from None
    lines_of = await asyncio.to_thread(_lines_of, list(group.files))
    out: list[Finding] = []
    for item in report.get("generalDiagnostics", []):
        real = Path(str(item.get("file", "")))
        display = group.files.get(real)
        if display is None:
            continue
        start = item.get("range", {}).get("start", {})
        out.append(
            finding(
                path=display,
                line=int(start.get("line", 0)) + 1,
                column=int(start.get("character", 0)) + 1,
                severity=_PY_SEVERITY.get(str(item.get("severity")), "info"),
                check=CHECK,
                code=str(item.get("rule") or PYRIGHT_NO_RULE),
                message=clean_message(str(item.get("message", ""))),
                anchor=_line(lines_of.get(real, []), int(start.get("line", 0))),
            )
        )
        if len(out) >= MAX_FINDINGS_PER_FILE * len(group.files):
            break
    return out


def _lines_of(paths: list[Path]) -> dict[Path, list[str]]:
    """Each file's lines, for the anchors of the CLI's findings (it does not quote them)."""
    out: dict[Path, list[str]] = {}
    for path in paths:
        try:
            out[path] = path.read_bytes().decode("utf-8", "replace").split("\n")
        except OSError:
            continue
    return out


def _line(lines: list[str], index: int) -> str:
    return lines[index] if 0 <= index < len(lines) else ""


__all__ = [
    "TYPESCRIPT_ENV",
    "Checkers",
    "TypeGroup",
    "TypePlan",
    "basedpyright_argv",
    "find_typescript",
    "node_executable",
    "plan_types",
    "run_group",
]
