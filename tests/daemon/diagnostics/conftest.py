"""Fixtures for the diagnostics tests: an in-process workspace, git, a pinned TypeScript."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from airlock.daemon.diagnostics.service import DiagnosticsService
from airlock.daemon.diagnostics.types import basedpyright_argv
from airlock.daemon.workspace import Workspace

TYPESCRIPT_VERSION = "5.9.3"


def typescript_cache() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "airlock-tests" / f"typescript-{TYPESCRIPT_VERSION}"


@pytest.fixture
async def untyped_workspace(workspace: Workspace, ws_dir: Path) -> AsyncIterator[Workspace]:
    """Editing tools run every check but ``types`` (syntax tests stay fast)."""
    original = workspace.ctx.diagnostics
    svc = DiagnosticsService(ws_dir, 60.0, edit_checks=["git-diff", "whitespace", "syntax"])
    workspace.ctx.diagnostics = svc
    yield workspace
    await svc.aclose()
    workspace.ctx.diagnostics = original


@pytest.fixture
async def service(ws_dir: Path) -> AsyncIterator[DiagnosticsService]:
    svc = DiagnosticsService(ws_dir, timeout_s=60.0)
    yield svc
    await svc.aclose()


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=30
    )
    return done.stdout


@pytest.fixture
def repo(ws_dir: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    git(ws_dir, "init", "-q", "-b", "main")
    git(ws_dir, "config", "user.email", "t@example.invalid")
    git(ws_dir, "config", "user.name", "t")
    git(ws_dir, "config", "commit.gpgsign", "false")
    return ws_dir


def commit_all(repo: Path, message: str = "c") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


@pytest.fixture
def pyright_available() -> None:
    if basedpyright_argv() is None:
        pytest.skip("basedpyright is not installed (pip install basedpyright)")


@pytest.fixture(scope="session")
def typescript_dir() -> Path:
    """typescript@5.9.3 installed once into a cache folder (npm), reused across runs."""
    prefix = typescript_cache()
    package = prefix / "node_modules" / "typescript"
    if (package / "lib" / "typescript.js").is_file():
        return package
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("node/npm are not installed: the TypeScript checker is absent")
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            npm,
            "install",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(prefix),
            f"typescript@{TYPESCRIPT_VERSION}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0 or not (package / "lib" / "typescript.js").is_file():
        pytest.skip(f"could not install typescript with npm: {done.stderr.strip()[-300:]}")
    return package
