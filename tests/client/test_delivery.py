"""authenticate_github / authenticate_vercel: firewall (lease) and command delivery."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from airlock.client.delivery import (
    DeliveryError,
    SandboxSession,
    authenticate_github,
    authenticate_vercel,
)
from airlock.client.proxy import ProxyClient
from airlock.client.sandboxes import LocalSandbox
from airlock.proxy.protocol import SessionInfo
from tests.fakes.github import FakeGitHub
from tests.fakes.github_proxy import github_behind_proxy
from tests.fakes.proxy_harness import ProxyProcess

REPO = "acme/widgets"


@dataclass
class Ctx:
    gh: FakeGitHub
    proxy: ProxyProcess
    pc: ProxyClient
    session: SessionInfo
    home: Path
    sandbox: LocalSandbox

    def sandbox_session(self, **kw: object) -> SandboxSession:
        return SandboxSession(
            sandbox=self.sandbox,
            workspace=str(self.home),
            proxy=self.pc,
            session_id=self.session.session_id,
            **kw,  # type: ignore[arg-type]
        )


@pytest.fixture
async def ctx(tmp_path: Path) -> AsyncIterator[Ctx]:
    async with github_behind_proxy(tmp_path, repos={REPO: None}) as w:
        env = w.env(GIT_CONFIG_NOSYSTEM="1")
        yield Ctx(w.gh, w.proxy, w.pc, w.session, w.home, LocalSandbox(base_env=env))


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_firewall_github_keeps_the_token_out(ctx: Ctx) -> None:
    token = ctx.gh.issue_token([REPO])
    delivery = await authenticate_github(ctx.sandbox_session(), token)
    assert delivery.mode == "firewall" and delivery.placeholder and delivery.warning is None
    env_file = ctx.home / ".airlock" / "credentials.env"
    include = ctx.home / ".airlock" / "git-credentials.gitconfig"
    assert _mode(env_file) == 0o600 and _mode(include) == 0o600
    assert env_file.read_text() == f"GH_TOKEN={delivery.placeholder}\n"
    for path in ctx.home.rglob("*"):
        if path.is_file():
            assert token not in path.read_text()
    leases = await ctx.pc.list_leases(ctx.session.session_id)
    assert [sorted(lease.hosts) for lease in leases] == [["api.github.com", "github.com"]]
    # git and gh in the sandbox work with only the placeholder.
    url = f"https://github.com/{REPO}.git"
    ls = await ctx.sandbox.run(["git", "ls-remote", url], str(ctx.home), {}, 30)
    assert ls.exit_code == 0, ls.stderr
    assert "refs/heads/main" in ls.stdout
    api = await ctx.sandbox.run(
        ["gh", "api", f"repos/{REPO}", "--jq", ".name"],
        str(ctx.home),
        {"GH_TOKEN": delivery.placeholder, "GH_CONFIG_DIR": str(ctx.home / "ghc")},
        30,
    )
    assert api.exit_code == 0, api.stderr
    assert api.stdout.strip() == "widgets"
    # Idempotent: a second delivery replaces the line and keeps one include.
    again = await authenticate_github(ctx.sandbox_session(), token)
    assert env_file.read_text() == f"GH_TOKEN={again.placeholder}\n"
    gitconfig = (ctx.home / ".gitconfig").read_text()
    assert gitconfig.count("git-credentials.gitconfig") == 1
    await delivery.revoke()
    await again.revoke()
    assert await ctx.pc.list_leases(ctx.session.session_id) == []
    denied = await ctx.sandbox.run(["git", "ls-remote", url], str(ctx.home), {}, 30)
    assert denied.exit_code != 0


async def test_command_github_writes_the_real_token_and_says_so(ctx: Ctx) -> None:
    token = ctx.gh.issue_token([REPO])
    delivery = await authenticate_github(ctx.sandbox_session(), token, delivery="command")
    assert delivery.placeholder is None and delivery.lease_id is None
    assert delivery.warning is not None and "REAL GitHub token" in delivery.warning
    env_file = ctx.home / ".airlock" / "credentials.env"
    assert env_file.read_text() == f"GH_TOKEN={token}\n"
    assert _mode(env_file) == 0o600
    assert await ctx.pc.list_leases(ctx.session.session_id) == []
    include = (ctx.home / ".airlock" / "git-credentials.gitconfig").read_text()
    assert 'http "https://github.com/"' in include and "extraheader" in include


async def test_vercel_firewall_and_env_file_merge(ctx: Ctx) -> None:
    await authenticate_github(ctx.sandbox_session(), "gh-token-value", delivery="command")
    delivery = await authenticate_vercel(ctx.sandbox_session(), "vercel-real-token")
    lines = (ctx.home / ".airlock" / "credentials.env").read_text().splitlines()
    assert lines == ["GH_TOKEN=gh-token-value", f"VERCEL_TOKEN={delivery.placeholder}"]
    assert delivery.placeholder and len(delivery.placeholder) == 24
    assert delivery.placeholder.isalnum()  # the vercel CLI refuses a token with "-"
    leases = await ctx.pc.list_leases(ctx.session.session_id)
    assert sorted(leases[0].hosts) == ["api.vercel.com", "vercel.com"]
    await delivery.revoke()
    command = await authenticate_vercel(
        ctx.sandbox_session(), "vercel-real-token", delivery="command"
    )
    assert command.warning and "REAL Vercel token" in command.warning
    assert (
        "VERCEL_TOKEN=vercel-real-token" in (ctx.home / ".airlock" / "credentials.env").read_text()
    )


async def test_firewall_without_proxy_is_refused(tmp_path: Path) -> None:
    session = SandboxSession(sandbox=LocalSandbox(), workspace=str(tmp_path))
    with pytest.raises(DeliveryError, match="command"):
        await authenticate_github(session, "tok")
    with pytest.raises(ValueError):
        await authenticate_vercel(session, "bad\ntoken", delivery="command")
