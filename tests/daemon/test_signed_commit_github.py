"""airlock-signed-commit end to end against the local GitHub (tests/fakes/github.py).

The script runs as a real subprocess in a real clone; the fake writes the
commit into its bare repository with git plumbing, checks ``expectedHeadOid``
and marks the commit verified; git fetches it back over smart HTTP.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.github import FakeGitHub
from tests.fakes.wait import wait_until

REPO = "acme/widgets"
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Agent",
    "GIT_AUTHOR_EMAIL": "agent@example.com",
    "GIT_COMMITTER_NAME": "Agent",
    "GIT_COMMITTER_EMAIL": "agent@example.com",
}


def sh_git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=True)
    return proc.stdout.decode()


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


@dataclass
class Sandbox:
    """A clone of the fake's repository and the environment the script runs with."""

    gh: FakeGitHub
    clone: Path
    env: dict[str, str]
    token: str

    def git(self, *args: str) -> str:
        return sh_git(self.clone, *args, env=self.env)

    async def signed_commit(self, *args: str) -> Result:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "airlock.daemon.signed_commit",
            *args,
            cwd=self.clone,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
        assert proc.returncode is not None
        return Result(proc.returncode, out.decode(), err.decode())

    def index_and_files(self) -> tuple[bytes, int, dict[str, bytes]]:
        index = self.clone / ".git" / "index"
        files = {
            str(p.relative_to(self.clone)): p.read_bytes()
            for p in sorted(self.clone.rglob("*"))
            if p.is_file() and ".git" not in p.parts
        }
        return index.read_bytes(), index.stat().st_mtime_ns, files


async def make_sandbox(gh: FakeGitHub, tmp_path: Path, branch: str = "main") -> Sandbox:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    token = gh.issue_token([REPO])
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        **GIT_IDENTITY,
        "GH_TOKEN": token,
        "GITHUB_API_URL": gh.api_url,
        "GH_HOST": f"127.0.0.1:{gh.git_port}",
        "SSL_CERT_FILE": str(gh.ca_path),
        "GIT_SSL_CAINFO": str(gh.ca_path),
    }
    clone = tmp_path / "clone"
    sh_git(tmp_path, "clone", "-q", "-b", branch, str(gh.repo_path(REPO)), str(clone), env=env)
    sh_git(
        clone, "remote", "set-url", "origin", f"https://127.0.0.1:{gh.git_port}/{REPO}.git", env=env
    )
    return Sandbox(gh, clone, env, token)


@pytest.fixture
async def gh(tmp_path: Path) -> AsyncIterator[FakeGitHub]:
    async with FakeGitHub(tmp_path / "gh", org="acme") as fake:
        await fake.create_repo(
            REPO, files={"README.md": "# widgets\n", "old.txt": "delete me\n", "keep.txt": "k\n"}
        )
        yield fake


async def new_remote_commit(gh: FakeGitHub, branch: str, message: str) -> str:
    """Move ``branch`` in the bare repository as another pusher would."""
    head = (await gh.head_sha(REPO, branch)) or ""
    oid = (await gh.git(REPO, "commit-tree", f"{head}^{{tree}}", "-p", head, "-m", message)).strip()
    await gh.git(REPO, "update-ref", f"refs/heads/{branch}", oid, head)
    return oid


def status_short(sb: Sandbox) -> list[str]:
    return sb.git("status", "--short").splitlines()


async def test_commit_binary_modification_and_deletion(gh: FakeGitHub, tmp_path: Path) -> None:
    sb = await make_sandbox(gh, tmp_path)
    big = os.urandom(2_400_000)
    (sb.clone / "assets").mkdir()
    (sb.clone / "assets" / "big.bin").write_bytes(big)
    (sb.clone / "README.md").write_text("# widgets\n\nnow documented\n")
    (sb.clone / "scratch.txt").write_text("untracked, stays out\n")
    sb.git("add", "assets/big.bin", "README.md")
    sb.git("rm", "-q", "old.txt")
    before_head = sb.git("rev-parse", "HEAD").strip()

    result = await sb.signed_commit(
        "--repo", REPO, "--branch", "main", "-m", "Add assets", "-b", "Why: test"
    )

    assert result.code == 0, result.stderr
    oid = result.stdout.strip()
    assert len(oid) == 40 and oid != before_head
    assert await gh.head_sha(REPO, "main") == oid
    assert oid in gh.verified_commits
    # The binary arrived byte-exact: same blob id as git computes locally.
    assert (await gh.git(REPO, "rev-parse", f"{oid}:assets/big.bin")).strip() == (
        sb.git("hash-object", "assets/big.bin").strip()
    )
    assert (
        hashlib.sha256(big).hexdigest()
        == hashlib.sha256(
            subprocess.run(
                [
                    "git",
                    "--git-dir",
                    str(gh.repo_path(REPO)),
                    "cat-file",
                    "blob",
                    f"{oid}:assets/big.bin",
                ],
                capture_output=True,
                check=True,
            ).stdout
        ).hexdigest()
    )
    tree = (await gh.git(REPO, "ls-tree", "-r", "--name-only", oid)).split()
    assert "old.txt" not in tree and "keep.txt" in tree
    assert (
        await gh.git(REPO, "log", "-1", "--format=%B", oid)
    ).strip() == "Add assets\n\nWhy: test"
    assert (await gh.git(REPO, "rev-parse", f"{oid}^")).strip() == before_head
    # Locally: HEAD is the new commit, and only untracked files remain.
    assert sb.git("rev-parse", "HEAD").strip() == oid
    assert status_short(sb) == ["?? scratch.txt"]
    # It authenticated with the bearer scheme on GraphQL.
    graphql = [r for r in gh.requests if r.path == "/graphql"]
    assert [r.auth_kind for r in graphql] == ["bearer"]


async def test_new_branch_from_default_branch(gh: FakeGitHub, tmp_path: Path) -> None:
    sb = await make_sandbox(gh, tmp_path)
    main_head = await gh.head_sha(REPO, "main")
    sb.git("checkout", "-q", "-b", "feature/x")
    (sb.clone / "keep.txt").write_text("changed\n")
    sb.git("add", "keep.txt")

    result = await sb.signed_commit("--repo", REPO, "--branch", "feature/x", "-m", "Change keep")

    assert result.code == 0, result.stderr
    oid = result.stdout.strip()
    assert "created branch feature/x from main" in result.stderr
    assert await gh.head_sha(REPO, "feature/x") == oid
    assert await gh.head_sha(REPO, "main") == main_head
    assert (await gh.git(REPO, "rev-parse", f"{oid}^")).strip() == main_head
    assert sb.git("rev-parse", "HEAD").strip() == oid
    assert status_short(sb) == []


async def test_new_branch_from_explicit_base(gh: FakeGitHub, tmp_path: Path) -> None:
    develop = await new_remote_commit(gh, "main", "develop work")
    await gh.git(REPO, "update-ref", "refs/heads/develop", develop)
    main_before = (await gh.git(REPO, "rev-parse", f"{develop}^")).strip()
    await gh.git(REPO, "update-ref", "refs/heads/main", main_before)
    sb = await make_sandbox(gh, tmp_path, branch="develop")
    (sb.clone / "new.txt").write_text("hello\n")
    sb.git("add", "new.txt")

    result = await sb.signed_commit(
        "--repo", REPO, "--branch", "topic", "--base", "develop", "-m", "Add new"
    )

    assert result.code == 0, result.stderr
    oid = result.stdout.strip()
    assert (await gh.git(REPO, "rev-parse", f"{oid}^")).strip() == develop
    assert sb.git("rev-parse", "HEAD").strip() == oid
    assert status_short(sb) == []


async def test_missing_base_branch_is_an_error_and_creates_nothing(
    gh: FakeGitHub, tmp_path: Path
) -> None:
    sb = await make_sandbox(gh, tmp_path)
    (sb.clone / "new.txt").write_text("hello\n")
    sb.git("add", "new.txt")
    head = sb.git("rev-parse", "HEAD").strip()

    result = await sb.signed_commit("--repo", REPO, "--branch", "t", "--base", "nope", "-m", "x")

    assert result.code == 1
    assert "base branch 'nope' does not exist" in result.stderr
    assert await gh.head_sha(REPO, "t") is None
    assert sb.git("rev-parse", "HEAD").strip() == head


async def test_guard_touches_nothing_and_sends_nothing(gh: FakeGitHub, tmp_path: Path) -> None:
    sb = await make_sandbox(gh, tmp_path)
    (sb.clone / "keep.txt").write_text("staged\n")
    sb.git("add", "keep.txt")
    (sb.clone / "README.md").write_text("unstaged edit\n")
    status_before = status_short(sb)  # (git status may refresh the index: call it first)
    before = sb.index_and_files()
    requests_before = len(gh.requests)
    head_before = await gh.head_sha(REPO, "main")

    result = await sb.signed_commit("--repo", REPO, "--branch", "main", "-m", "x")

    assert result.code == 1 and result.stdout == ""
    assert "unstaged changes to tracked files: README.md" in result.stderr
    assert len(gh.requests) == requests_before
    assert sb.index_and_files() == before
    assert status_short(sb) == status_before
    assert await gh.head_sha(REPO, "main") == head_before


async def _move_branch_on_graphql(gh: FakeGitHub, times: int) -> list[str]:
    """Each time a GraphQL request arrives (delayed by the fake), move main."""
    moved: list[str] = []
    seen = 0
    while len(moved) < times:

        def arrived(after: int = seen) -> int:
            count = sum(1 for r in gh.requests if r.path == "/graphql")
            return count if count > after else 0

        # Polled every 10 ms: main must move inside the fake's 0.4 s delay.
        seen = await wait_until(arrived, timeout=120, interval=0.01, max_interval=0.01)
        moved.append(await new_remote_commit(gh, "main", f"concurrent {len(moved)}"))
    return moved


async def _race(
    gh: FakeGitHub, times: int, run: Callable[[], Awaitable[Result]]
) -> tuple[Result, list[str]]:
    gh.delays["/graphql"] = 0.4
    mover = asyncio.create_task(_move_branch_on_graphql(gh, times))
    try:
        result = await run()
        moved = await asyncio.wait_for(mover, timeout=5)
    finally:
        mover.cancel()
    return result, moved


async def test_stale_head_is_retried_once(gh: FakeGitHub, tmp_path: Path) -> None:
    sb = await make_sandbox(gh, tmp_path)
    (sb.clone / "keep.txt").write_text("mine\n")
    sb.git("add", "keep.txt")

    result, moved = await _race(
        gh, 1, lambda: sb.signed_commit("--repo", REPO, "--branch", "main", "-m", "Mine")
    )

    assert result.code == 0, result.stderr
    oid = result.stdout.strip()
    assert "moved" in result.stderr and "retrying once" in result.stderr
    # The retry built on the head that moved under us.
    assert (await gh.git(REPO, "rev-parse", f"{oid}^")).strip() == moved[0]
    assert await gh.head_sha(REPO, "main") == oid
    assert sb.git("rev-parse", "HEAD").strip() == oid


async def test_stale_head_twice_is_a_clear_error(gh: FakeGitHub, tmp_path: Path) -> None:
    sb = await make_sandbox(gh, tmp_path)
    (sb.clone / "keep.txt").write_text("mine\n")
    sb.git("add", "keep.txt")
    local_head = sb.git("rev-parse", "HEAD").strip()

    result, moved = await _race(
        gh, 2, lambda: sb.signed_commit("--repo", REPO, "--branch", "main", "-m", "Mine")
    )

    assert result.code == 1
    assert "moved on GitHub while committing, twice in a row" in result.stderr
    assert "Nothing was committed" in result.stderr
    assert await gh.head_sha(REPO, "main") == moved[-1]
    assert not gh.verified_commits
    assert sb.git("rev-parse", "HEAD").strip() == local_head
    assert status_short(sb) == ["M  keep.txt"]


async def test_rejected_token_is_reported(gh: FakeGitHub, tmp_path: Path) -> None:
    sb = await make_sandbox(gh, tmp_path)
    gh.expire_token(sb.token)
    (sb.clone / "keep.txt").write_text("mine\n")
    sb.git("add", "keep.txt")

    result = await sb.signed_commit("--repo", REPO, "--branch", "main", "-m", "Mine")

    assert result.code == 1
    assert "HTTP 401" in result.stderr and "GitHub shell tool" in result.stderr
    assert sb.token not in result.stderr
    assert status_short(sb) == ["M  keep.txt"]
