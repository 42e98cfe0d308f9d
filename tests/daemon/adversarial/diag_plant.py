"""Hostile workspaces for the diagnostics tests: programs that leave a marker when run.

Also the fixtures (a workspace and a marker folder every user can reach: the exec
user must be able to run what is planted); test modules import them.

Each planted program writes its caller's uid to a marker file, so a test can
tell both *whether* it ran and *as whom*. The markers live outside the
workspace, in a folder every user may write.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

MARKER_SCRIPT = "#!/bin/sh\nid -u > {marker}\nexit 1\n"
TYPESCRIPT_JS = (
    'require("fs").writeFileSync({marker!r}, String(process.getuid()) + "\\n");\n'
    "module.exports = {{}};\n"
)


@dataclass(frozen=True)
class Markers:
    folder: Path

    def path(self, name: str) -> Path:
        return self.folder / name

    def ran(self) -> dict[str, int]:
        """Marker name -> the uid that wrote it."""
        return {
            p.name: int(p.read_text().strip() or -1) for p in self.folder.iterdir() if p.is_file()
        }


def _script(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(MARKER_SCRIPT.format(marker=marker))
    path.chmod(0o755)


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo)}
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)


def plant_git(ws: Path, markers: Markers) -> Path:
    """A repository whose config runs a program on every read of the work tree.

    fsmonitor hook, clean/process filter and textconv for every file, hooks in
    every slot; the tracked ``notes.txt`` then gains a trailing space, so a
    real ``git diff`` would have to read (and filter) it.
    """
    git(ws, "init", "-q", ".")
    (ws / "notes.txt").write_text("one\ntwo\n")
    git(ws, "add", "notes.txt")
    git(ws, "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qm", "c")
    for name in ("fsmonitor", "clean", "process", "textconv", "hook"):
        _script(ws / ".evil" / name, markers.path(f"git-{name}"))
    for hook in ("post-index-change", "pre-commit", "post-checkout", "reference-transaction"):
        _script(ws / ".evil" / "hooks" / hook, markers.path("git-hook"))
    config = {
        "core.fsmonitor": str(ws / ".evil" / "fsmonitor"),
        "core.hooksPath": str(ws / ".evil" / "hooks"),
        "filter.evil.clean": str(ws / ".evil" / "clean"),
        "filter.evil.process": str(ws / ".evil" / "process"),
        "filter.evil.required": "false",
        "diff.evil.textconv": str(ws / ".evil" / "textconv"),
        "diff.external": str(ws / ".evil" / "textconv"),
    }
    for key, value in config.items():
        git(ws, "config", key, value)
    (ws / ".gitattributes").write_text("* filter=evil diff=evil\n")
    (ws / "notes.txt").write_text("one \ntwo\n")
    return ws / "notes.txt"


def plant_python(ws: Path, markers: Markers) -> Path:
    """A project whose ``.venv/bin/python`` is a program of the agent's."""
    (ws / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    _script(ws / ".venv" / "bin" / "python", markers.path("venv-python"))
    (ws / "mod.py").write_text("x: int = 'not an int'\n")
    return ws / "mod.py"


def plant_typescript(ws: Path, markers: Markers) -> Path:
    """A project whose ``node_modules/typescript`` is the agent's code."""
    lib = ws / "node_modules" / "typescript" / "lib"
    lib.mkdir(parents=True)
    (lib / "typescript.js").write_text(TYPESCRIPT_JS.format(marker=str(markers.path("ts"))))
    (ws / "node_modules" / "typescript" / "package.json").write_text(
        '{"name": "typescript", "main": "lib/typescript.js"}'
    )
    (ws / "tsconfig.json").write_text('{"compilerOptions": {"strict": true}}\n')
    (ws / "app.ts").write_text("const n: number = 'x';\n")
    return ws / "app.ts"


@pytest.fixture(name="open_base")
def open_base_fixture() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="al-adv-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(name="markers")
def markers_fixture(open_base: Path) -> Markers:
    folder = open_base / "markers"
    folder.mkdir()
    folder.chmod(0o777)
    return Markers(folder)


@pytest.fixture(name="hostile_ws")
def hostile_ws_fixture(open_base: Path) -> Path:
    ws = open_base / "ws"
    ws.mkdir()
    ws.chmod(0o777)
    return ws
