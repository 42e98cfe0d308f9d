"""The GitHub shell tool end to end: real gh and git, the real proxy, the local GitHub.

The sandbox is a LocalSandbox whose environment holds only what a sandbox
would: the session's proxy URL and the proxy CA. The real token exists only in
the provider (this process), the proxy (lease) and the fake GitHub.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airlock.client.github.shell import GitHubShell, GitHubShellDenied
from airlock.client.providers import GitHubAppProvider
from airlock.client.proxy import ProxyClient
from airlock.client.sandboxes import LocalSandbox
from airlock.proxy.protocol import SessionInfo
from tests.fakes.github import FakeGitHub
from tests.fakes.github_proxy import GITHUB_HOSTS, app_provider, local_shell, proxy_for, shell_call
from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.wait import wait_until

pytestmark = pytest.mark.skipif(shutil.which("gh") is None, reason="gh is not installed")

REPO = "acme/widgets"
PERM = {"provider": "github", "repositories": [REPO], "access": "write"}

SPY = """#!/bin/sh
# Records what the sandboxed program sees, then runs the real program.
env > "$AIRLOCK_SPY_DIR/env-$$"
# Like a gh that writes state: the tool must remove the directory afterwards.
[ -n "$GH_CONFIG_DIR" ] && mkdir -p "$GH_CONFIG_DIR" && touch "$GH_CONFIG_DIR/state.yml"
exec {real} "$@"
"""


@dataclass
class Env:
    gh: FakeGitHub
    proxy: ProxyProcess
    pc: ProxyClient
    session: SessionInfo
    shell: GitHubShell
    provider: GitHubAppProvider
    workspace: Path
    spy_dir: Path
    config_base: Path
    clock: list[float]
    sandbox_env: dict[str, str]

    def call(self, command: str, **over: Any) -> dict[str, Any]:
        return shell_call(command, "test command", **over)

    def real_tokens(self) -> list[str]:
        return [m.token for m in self.gh.mints]


def _spy(path: Path, real: str) -> Path:
    path.write_text(SPY.format(real=real))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    short = Path(tempfile.mkdtemp(prefix="al-gh-"))
    async with FakeGitHub(tmp_path / "github", org="acme") as gh:
        await gh.create_repo(REPO)
        await gh.create_repo("acme/other")
        async with proxy_for(gh, tmp_path / "proxy") as proxy:
            pc = proxy.client()
            session = await pc.create_session(allow=list(GITHUB_HOSTS))
            workspace = tmp_path / "ws"
            workspace.mkdir()
            spy_dir = tmp_path / "spy"
            spy_dir.mkdir()
            config_base = short / "cfg"
            config_base.mkdir()
            sandbox_env = proxy.client_env(session, AIRLOCK_SPY_DIR=str(spy_dir))
            sandbox_env["HOME"] = str(tmp_path / "home")
            (tmp_path / "home").mkdir()
            clock = [time.time()]
            provider = app_provider(gh, clock=lambda: clock[0])
            shell = local_shell(
                provider,
                pc,
                session,
                sandbox_env,
                workspace=workspace,
                executables={
                    "gh": [str(_spy(tmp_path / "gh-spy", shutil.which("gh") or "gh"))],
                    "git": [str(_spy(tmp_path / "git-spy", shutil.which("git") or "git"))],
                    "gh-signed-commit": [sys.executable, "-m", "airlock.daemon.signed_commit"],
                },
                config_dir_base=config_base,
            )
            try:
                yield Env(
                    gh, proxy, pc, session, shell, provider, workspace, spy_dir,
                    config_base, clock, sandbox_env,
                )  # fmt: skip
            finally:
                await pc.aclose()
                shutil.rmtree(short, ignore_errors=True)


def _assert_sandbox_never_saw(env: Env, *outputs: str) -> None:
    tokens = env.real_tokens()
    assert tokens, "the test expected at least one mint"
    seen = [p.read_text(errors="replace") for p in env.spy_dir.iterdir()]
    files = [
        p.read_bytes().decode(errors="replace") for p in env.workspace.rglob("*") if p.is_file()
    ]
    for token in tokens:
        for text in (*seen, *files, *outputs, *env.sandbox_env.values()):
            assert token not in text


async def _leases(env: Env) -> list[Any]:
    return await env.pc.list_leases(env.session.session_id)


async def test_gh_pr_view_and_api_through_the_proxy(env: Env) -> None:
    await env.gh.git(REPO, "branch", "topic", "main")
    env.gh.add_pull_sync(REPO, title="Make widgets shinier", head="topic", body="Body text")
    result = await env.shell.run(env.call("gh pr view 1"))
    assert result.exit_code == 0, result.stderr
    assert "Make widgets shinier" in result.stdout
    api = await env.shell.run(env.call("gh api repos/acme/widgets"))
    assert api.exit_code == 0, api.stderr
    assert '"full_name":"acme/widgets"' in api.stdout.replace(" ", "")
    # The fake saw the real token (the proxy swapped it in), never a placeholder.
    api_requests = [r for r in env.gh.requests if r.listener == "api" and r.auth_kind != "jwt"]
    assert api_requests and all(r.token in env.real_tokens() for r in api_requests)
    # The sandboxed gh saw only the placeholder.
    seen = "".join(p.read_text() for p in env.spy_dir.iterdir())
    assert "GH_TOKEN=ghs_" in seen  # shaped like an installation token
    assert "GH_CONFIG_DIR=" in seen and "GH_PROMPT_DISABLED=1" in seen
    _assert_sandbox_never_saw(env, result.stdout, result.stderr, api.stdout, api.stderr)
    assert await _leases(env) == []
    assert list(env.config_base.iterdir()) == []
    # Two commands within the hour: one mint.
    assert len(env.gh.mints) == 1


async def test_echoed_token_comes_back_redacted(env: Env) -> None:
    env.gh.echo_tokens = True
    result = await env.shell.run(env.call("gh api user"))
    assert result.exit_code == 0, result.stderr
    token = env.real_tokens()[0]
    assert token not in result.stdout
    from airlock.client.github.redact import basic_credential

    assert basic_credential(token) not in result.stdout
    body = json.loads(result.stdout)
    # The raw token: scrubbed to the placeholder by the proxy, or redacted by the tool.
    assert body["echo"] == "[redacted]" or (
        body["echo"].startswith("ghs_") and body["echo"] != token
    )
    # Its git Basic form: the proxy now scrubs it to the placeholder's Basic form, and the
    # tool redacts whatever real form might remain. Either way, only a placeholder shows.
    if body["echo_basic"] != "[redacted]":
        decoded = base64.b64decode(body["echo_basic"]).decode()
        user, _, secret = decoded.partition(":")
        assert user == "x-access-token" and secret.startswith("ghs_"), decoded
        assert secret != token
    _assert_sandbox_never_saw(env, result.stdout, result.stderr)


async def test_clone_and_push_land_in_the_bare_repo(env: Env) -> None:
    clone = await env.shell.run(env.call("gh repo clone acme/widgets"))
    assert clone.exit_code == 0, clone.stderr
    wc = env.workspace / "widgets"
    assert (wc / "README.md").exists()
    (wc / "feature.txt").write_text("feature\n")
    git_env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(env.workspace.parent)}
    for args in (
        ["add", "feature.txt"],
        ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "feature"],
    ):
        proc = await asyncio.create_subprocess_exec("git", *args, cwd=wc, env=git_env)
        assert await proc.wait() == 0
    # A hook in the checkout must not run while the lease is live.
    marker = env.workspace.parent / "hook-ran"
    hook = wc / ".git" / "hooks" / "pre-push"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    push = await env.shell.run(
        env.call("git push origin HEAD:refs/heads/x", working_directory="widgets")
    )
    assert push.exit_code == 0, push.stderr
    assert not marker.exists()
    local = await asyncio.create_subprocess_exec(
        "git", "rev-parse", "HEAD", cwd=wc, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await local.communicate()
    assert await env.gh.head_sha(REPO, "x") == out.decode().strip()
    # git ran with the hardening the contract asks for.
    seen = "".join(p.read_text() for p in env.spy_dir.iterdir())
    assert "GIT_CONFIG_KEY_" in seen and "core.hooksPath" in seen
    assert "extraheader" in seen
    _assert_sandbox_never_saw(env, clone.stdout, clone.stderr, push.stdout, push.stderr)
    assert await _leases(env) == []
    # An ssh-style origin of the same repository is rewritten to https and works.
    proc = await asyncio.create_subprocess_exec(
        "git", "remote", "set-url", "origin", "git@github.com:acme/widgets.git", cwd=wc
    )
    assert await proc.wait() == 0
    fetch = await env.shell.run(env.call("git fetch origin x", working_directory="widgets"))
    assert fetch.exit_code == 0, fetch.stderr


REFUSALS: list[tuple[str, dict[str, Any]]] = [
    ("gh pr view 1 --repo acme/other", {}),
    ("gh pr view 1 -R acme/other", {}),
    ("gh pr view 1 --repo=acme/other", {}),
    ("gh repo clone acme/other", {}),
    ("gh repo view acme/other", {}),
    ("gh repo fork acme/other", {}),
    ("gh pr view 1", {"permissions": [{**PERM, "repositories": ["evil/widgets"]}]}),
    ("gh pr view 1", {"working_directory": "../outside"}),
    ("gh pr view 1", {"permissions": []}),
    ("gh pr view 1", {"permissions": [PERM, PERM]}),
    ("gh pr view 1", {"permissions": [{**PERM, "access": "read"}]}),
    ("git push origin main", {}),  # the workspace is not a git checkout
    ("gh-signed-commit --branch b -m x", {}),
    ("GH_TOKEN=x gh auth status", {}),
    ("gh pr view $(printenv)", {}),
]


async def test_refusals_mint_nothing(env: Env) -> None:
    # One proxy for all cases (start-up dominates); each case is checked on its own.
    for command, over in REFUSALS:
        with pytest.raises(GitHubShellDenied) as info:
            await env.shell.run(env.call(command, **over))
        assert info.value.reason, command
        denied = await env.shell.invoke(env.call(command, **over))
        assert denied["type"] == "denied", command
        assert env.gh.mints == [], command
    assert not any(r.path.endswith("/access_tokens") for r in env.gh.requests)
    assert await _leases(env) == []


async def test_git_refusals_in_a_checkout_mint_nothing(env: Env, tmp_path: Path) -> None:
    wc = env.workspace / "repo"
    (wc / "sub").mkdir(parents=True)
    for args in (["init", "-q"], ["remote", "add", "origin", "https://github.com/acme/other.git"]):
        proc = await asyncio.create_subprocess_exec("git", *args, cwd=wc)
        assert await proc.wait() == 0
    with pytest.raises(GitHubShellDenied, match=r"not https://github\.com/acme/widgets\.git"):
        await env.shell.run(env.call("git fetch origin", working_directory="repo"))
    with pytest.raises(GitHubShellDenied, match="top level"):
        await env.shell.run(env.call("git fetch origin", working_directory="repo/sub"))
    with pytest.raises(GitHubShellDenied, match="remote origin"):
        await env.shell.run(env.call("git fetch upstream", working_directory="repo"))
    assert env.gh.mints == []


async def test_expired_token_is_reminted(env: Env) -> None:
    first = await env.shell.run(env.call("gh api repos/acme/widgets --jq .name"))
    second = await env.shell.run(env.call("gh api repos/acme/widgets --jq .name"))
    assert first.stdout.strip() == second.stdout.strip() == "widgets"
    assert len(env.gh.mints) == 1
    env.clock[0] += 3600  # an hour later the cached token has expired
    third = await env.shell.run(env.call("gh api repos/acme/widgets --jq .name"))
    assert third.exit_code == 0, third.stderr
    assert len(env.gh.mints) == 2


async def test_failure_and_cancellation_clean_up(env: Env) -> None:
    failed = await env.shell.run(env.call("gh pr view 999"))
    assert failed.exit_code not in (0, None)
    assert await _leases(env) == []
    assert list(env.config_base.iterdir()) == []

    env.gh.delays["/user"] = 30
    env.shell.timeout_s = 2
    timed_out = await env.shell.run(env.call("gh api user"))
    assert timed_out.timed_out and timed_out.exit_code is None
    assert await _leases(env) == []
    assert list(env.config_base.iterdir()) == []

    env.shell.timeout_s = 60
    before = [r.path for r in env.gh.requests].count("/user")
    task = asyncio.create_task(env.shell.run(env.call("gh api user")))
    with contextlib.suppress(AssertionError):
        await wait_until(lambda: [r.path for r in env.gh.requests].count("/user") > before)
    assert [r.path for r in env.gh.requests].count("/user") > before
    assert len(await _leases(env)) == 1
    assert len(list(env.config_base.iterdir())) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _leases(env) == []
    assert list(env.config_base.iterdir()) == []


async def test_output_keeps_the_tail(env: Env) -> None:
    env.shell.max_output_bytes = 300
    result = await env.shell.run(env.call("gh api repos/acme/widgets"))
    assert result.exit_code == 0
    assert result.stdout.startswith("[output truncated: showing final 300 bytes]\n")
    assert result.stdout_truncated
    assert result.stdout.rstrip().endswith("}")


async def test_commands_of_a_session_are_serialised(env: Env) -> None:
    env.gh.delays["/user"] = 0.5
    results = await asyncio.gather(
        *(env.shell.run(env.call("gh api user --jq .login")) for _ in range(3))
    )
    assert all(r.exit_code == 0 for r in results)
    assert [r.path for r in env.gh.requests].count("/user") == 3
    # Never two of this session's commands at the fake at once.
    assert env.gh.max_in_flight == 1
    assert len(env.gh.mints) == 1


async def test_signed_commit_through_the_shell(env: Env) -> None:
    clone = await env.shell.run(env.call("gh repo clone acme/widgets"))
    assert clone.exit_code == 0, clone.stderr
    wc = env.workspace / "widgets"
    (wc / "signed.txt").write_text("signed\n")
    proc = await asyncio.create_subprocess_exec("git", "add", "signed.txt", cwd=wc)
    assert await proc.wait() == 0
    result = await env.shell.run(
        env.call(
            "gh-signed-commit --repo acme/widgets --branch signed -m 'Add signed file'",
            working_directory="widgets",
        )
    )
    assert result.exit_code == 0, result.stderr
    oid = await env.gh.head_sha(REPO, "signed")
    assert oid is not None and oid in env.gh.verified_commits
    assert oid in result.stdout
    _assert_sandbox_never_saw(env, result.stdout, result.stderr)


async def test_through_airlockd_exec(env: Env) -> None:
    """The same command with DaemonSandbox: the real daemon's exec runs gh."""
    from airlock.client.sandboxes import DaemonSandbox
    from tests.fakes.daemon_harness import running_daemon

    async with (
        running_daemon(env.workspace, env=env.sandbox_env) as daemon,
        daemon.client() as client,
    ):
        shell = GitHubShell(
            org="acme",
            provider=env.provider,
            proxy=env.pc,
            session=env.session,
            sandbox=DaemonSandbox(client),
            workspace=str(env.workspace),
            config_dir_base=str(env.config_base),
        )
        result = await shell.run(env.call("gh api repos/acme/widgets --jq .default_branch"))
        assert result.exit_code == 0, result.stderr
        assert result.stdout.strip() == "main"
        # Long output: airlockd spills it to its artifacts dir; the tool removes the spill
        # (it could hold an unscrubbed form of the token) and returns the tail.
        env.gh.echo_tokens = True
        shell.max_output_bytes = 150
        long = await shell.run(env.call("gh api user --include"))
        assert long.exit_code == 0, long.stderr
        assert long.stdout_truncated
        assert long.stdout.startswith("[output truncated: showing final 150 bytes]\n")
        spills = [p for p in daemon.artifacts_dir.rglob("*") if p.is_file()]
        assert spills == []
        _assert_sandbox_never_saw(env, long.stdout, long.stderr)
        with pytest.raises(GitHubShellDenied):
            await shell.run(env.call("gh pr view 1", working_directory="../outside"))
    _assert_sandbox_never_saw(env, result.stdout, result.stderr)
    assert await _leases(env) == []
    assert list(env.config_base.iterdir()) == []


async def test_unknown_session_is_a_tool_error(env: Env) -> None:
    shell = GitHubShell(
        org="acme",
        provider=env.provider,
        proxy=env.pc,
        session="no-such-session",
        sandbox=LocalSandbox(base_env=env.sandbox_env),
        workspace=str(env.workspace),
        config_dir_base=str(env.config_base),
    )
    out = await shell.invoke(env.call("gh api user"))
    assert out["type"] == "error" and "session_not_found" in out["reason"]
    for token in env.real_tokens():
        assert token not in out["reason"]
    # The command never ran, and nothing was left behind.
    assert not any(r.path == "/user" for r in env.gh.requests)
    assert list(env.config_base.iterdir()) == []


async def test_each_command_gets_only_what_it_needs(env: Env) -> None:
    """Derived leases (client/github/scopes.py) hold at the proxy, through real gh."""
    # Read-only gh: a GraphQL query passes, a mutation is refused by the proxy.
    query = await env.shell.run(env.call("gh api graphql -f query='query { viewer { login } }'"))
    assert "lease_scope" not in query.stderr
    mutation = await env.shell.run(
        env.call(
            "gh api graphql -f query='mutation { addComment(input: {}) { clientMutationId } }'"
        )
    )
    assert mutation.exit_code != 0
    assert "403" in mutation.stderr or "lease_scope" in mutation.stderr
    # Other gh: only the declared repository's paths, whatever the real token could reach.
    other = await env.shell.run(
        env.call("gh api -X POST repos/acme/other/issues/1/comments -f body=x")
    )
    assert other.exit_code != 0
    for needle in ("anonymous mutation", "/repos/acme/other"):
        env.proxy.wait_audit(
            lambda e, needle=needle: (
                e.get("event") == "refusal"  # type: ignore[misc]
                and e.get("reason") == "lease_scope"
                and needle in str(e.get("detail"))
            ),
            what=f"a lease_scope refusal naming {needle}",
        )
    _assert_sandbox_never_saw(env, mutation.stdout, mutation.stderr, other.stdout, other.stderr)
