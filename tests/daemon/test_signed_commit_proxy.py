"""airlock-signed-commit as production runs it: through the GitHub shell tool,
the real airlock-proxy and the local GitHub. The sandbox side holds only the
placeholder; the real installation token never reaches it."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airlock.client.github.shell import GitHubShell
from airlock.client.proxy import ProxyClient
from airlock.proxy.protocol import SessionInfo
from tests.fakes.github import FakeGitHub
from tests.fakes.github_proxy import app_provider, github_behind_proxy, local_shell
from tests.fakes.proxy_harness import ProxyProcess

REPO = "acme/widgets"
PERMISSION = {"provider": "github", "repositories": [REPO], "access": "write"}
SPY = """#!/bin/sh
env > "{spy_dir}/env-$$"
exec {python} -m airlock.daemon.signed_commit "$@"
"""
IDENTITY = {
    "GIT_AUTHOR_NAME": "Agent",
    "GIT_AUTHOR_EMAIL": "agent@example.com",
    "GIT_COMMITTER_NAME": "Agent",
    "GIT_COMMITTER_EMAIL": "agent@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@dataclass
class World:
    gh: FakeGitHub
    proxy: ProxyProcess
    pc: ProxyClient
    session: SessionInfo
    shell: GitHubShell
    clone: Path
    workspace: Path
    spy_dir: Path
    sandbox_env: dict[str, str]

    def git(self, *args: str) -> str:
        env = {**self.sandbox_env, **IDENTITY}
        proc = subprocess.run(
            ["git", *args], cwd=self.clone, env=env, capture_output=True, check=True
        )
        return proc.stdout.decode()

    def call(self, command: str) -> dict[str, Any]:
        return {
            "command": command,
            "permissions": [PERMISSION],
            "description": "commit the staged change as a verified commit",
            "working_directory": "widgets",
        }


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    short = Path(tempfile.mkdtemp(prefix="al-sc-"))
    files = {"README.md": "# w\n", "old.txt": "old\n"}
    async with github_behind_proxy(tmp_path, repos={REPO: files}) as w:
        gh, proxy, pc, session = w.gh, w.proxy, w.pc, w.session
        sandbox_env = w.env(**IDENTITY)
        workspace = tmp_path / "ws"
        workspace.mkdir()
        clone = workspace / "widgets"
        subprocess.run(
            ["git", "clone", "-q", str(gh.repo_path(REPO)), str(clone)],
            env=sandbox_env, check=True, capture_output=True,
        )  # fmt: skip
        subprocess.run(
            ["git", "remote", "set-url", "origin", f"https://github.com/{REPO}.git"],
            cwd=clone, env=sandbox_env, check=True,
        )  # fmt: skip
        spy_dir = tmp_path / "spy"
        spy_dir.mkdir()
        spy = tmp_path / "gh-signed-commit"
        spy.write_text(SPY.format(spy_dir=spy_dir, python=sys.executable))
        spy.chmod(spy.stat().st_mode | stat.S_IXUSR)
        shell = local_shell(
            app_provider(gh),
            pc,
            session,
            sandbox_env,
            workspace=workspace,
            executables={"gh-signed-commit": [str(spy)]},
            config_dir_base=short,
        )
        try:
            yield World(gh, proxy, pc, session, shell, clone, workspace, spy_dir, sandbox_env)
        finally:
            shutil.rmtree(short, ignore_errors=True)


def sandbox_texts(world: World) -> list[str]:
    """Everything the sandbox side could see: env dumps, environment, every file."""
    texts = [p.read_text(errors="replace") for p in world.spy_dir.iterdir()]
    texts += list(world.sandbox_env.values())
    texts += [
        p.read_bytes().decode(errors="replace")
        for p in world.workspace.rglob("*")
        if p.is_file() and "objects" not in p.parts
    ]
    return texts


async def test_signed_commit_through_shell_and_proxy(world: World) -> None:
    payload = os.urandom(2_400_000)
    (world.clone / "data.bin").write_bytes(payload)
    (world.clone / "notes.txt").write_text("untracked\n")
    world.git("add", "data.bin")
    world.git("rm", "-q", "old.txt")
    main_head = await world.gh.head_sha(REPO, "main")

    result = await world.shell.run(
        world.call(
            "gh-signed-commit --repo acme/widgets --branch topic -m 'Add data' -b 'Why: test'"
        )
    )

    assert result.exit_code == 0, result.stderr
    oid = result.stdout.strip().splitlines()[-1]
    assert await world.gh.head_sha(REPO, "topic") == oid
    assert oid in world.gh.verified_commits
    assert (await world.gh.git(REPO, "rev-parse", f"{oid}^")).strip() == main_head
    assert (await world.gh.git(REPO, "rev-parse", f"{oid}:data.bin")).strip() == world.git(
        "hash-object", "data.bin"
    ).strip()
    assert "old.txt" not in (await world.gh.git(REPO, "ls-tree", "--name-only", oid)).split()
    assert world.git("rev-parse", "HEAD").strip() == oid
    assert world.git("status", "--short").splitlines() == ["?? notes.txt"]

    # GitHub saw only the real token, on the API (bearer) and on git (Basic).
    real = [m.token for m in world.gh.mints]
    assert len(real) == 1
    graphql = [r for r in world.gh.requests if r.path == "/graphql"]
    fetches = [r for r in world.gh.requests if r.listener == "git"]
    assert graphql and all(r.token == real[0] and r.auth_kind == "bearer" for r in graphql)
    assert fetches and all(r.token == real[0] and r.auth_kind == "basic" for r in fetches)
    # The sandbox saw only the placeholder.
    dumps = "".join(p.read_text() for p in world.spy_dir.iterdir())
    assert "GH_TOKEN=ghs_" in dumps  # a placeholder shaped like an installation token
    for text in (*sandbox_texts(world), result.stdout, result.stderr):
        assert real[0] not in text
    # The lease is gone and the proxy audited the swaps.
    assert await world.pc.list_leases(world.session.session_id) == []
    await world.proxy.await_audit(
        lambda e: "swap" in str(e.get("event", "")) and e.get("host") == "github.com",
        what="swap for github.com",
    )
    hosts = {e.get("host") for e in world.proxy.audit_events() if "swap" in str(e.get("event", ""))}
    assert {"api.github.com", "github.com"} <= hosts


async def test_placeholder_without_a_lease_gets_nowhere(world: World) -> None:
    (world.clone / "x.txt").write_text("x\n")
    world.git("add", "x.txt")
    env = {**world.sandbox_env, "GH_TOKEN": "airlock-gh-00000000-0000-0000-0000-000000000000"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.daemon.signed_commit",
        "--repo", REPO, "--branch", "main", "-m", "sneaky",
        cwd=world.clone, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1
    assert out == b""
    assert b"HTTP 401" in err or b"HTTP 403" in err or b"cannot reach" in err
    assert world.gh.verified_commits == set()
    assert world.gh.mints == []
