"""The GitHub shell tool against a GitHub Enterprise Server host (API and git on one host)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest

from airlock.client.github.shell import GitHubShell
from airlock.client.sandboxes import LocalSandbox
from tests.fakes.github import FakeGitHub
from tests.fakes.github_proxy import app_provider, proxy_for, shell_call

pytestmark = pytest.mark.skipif(shutil.which("gh") is None, reason="gh is not installed")

GHE = "ghe.airlock.test"


def _call(command: str, **over: str) -> dict[str, object]:
    return shell_call(command, "ghe test", **over)


async def test_enterprise_host_end_to_end(tmp_path: Path) -> None:
    short = Path(tempfile.mkdtemp(prefix="al-ghe-"))
    try:
        async with FakeGitHub(tmp_path / "github", org="acme", enterprise_host=GHE) as gh:
            await gh.create_repo("acme/widgets")
            await gh.git("acme/widgets", "branch", "topic", "main")
            gh.add_pull_sync("acme/widgets", title="Enterprise PR", head="topic")
            async with (
                proxy_for(gh, tmp_path / "proxy", intercept=[GHE], allow=[GHE]) as proxy,
                proxy.client() as pc,
            ):
                session = await pc.create_session(allow=[GHE])
                home = tmp_path / "home"
                home.mkdir()
                workspace = tmp_path / "ws"
                workspace.mkdir()
                provider = app_provider(gh, api_url=f"{gh.api_url}/api/v3")
                shell = GitHubShell(
                    org="acme",
                    provider=provider,
                    proxy=pc,
                    session=session,
                    sandbox=LocalSandbox(base_env=proxy.client_env(session, HOME=str(home))),
                    workspace=str(workspace),
                    api_host=GHE,
                    git_host=GHE,
                    config_dir_base=str(short),
                )
                view = await shell.run(_call("gh pr view 1"))
                assert view.exit_code == 0, view.stderr
                assert "Enterprise PR" in view.stdout
                clone = await shell.run(_call("gh repo clone acme/widgets"))
                assert clone.exit_code == 0, clone.stderr
                wc = workspace / "widgets"
                (wc / "ghe.txt").write_text("ghe\n")
                for args in (
                    ["add", "ghe.txt"],
                    ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "ghe"],
                ):
                    proc = await asyncio.create_subprocess_exec("git", *args, cwd=wc)
                    assert await proc.wait() == 0
                push = await shell.run(
                    _call("git push origin HEAD:refs/heads/ghe", working_directory="widgets")
                )
                assert push.exit_code == 0, push.stderr
                assert await gh.head_sha("acme/widgets", "ghe") is not None
                # The github.com form of the repository is not this host's.
                refused = await shell.invoke(_call("gh pr view 1 --repo github.com/acme/other"))
                assert refused["type"] == "denied"
                assert await pc.list_leases(session.session_id) == []
            hosts = {r.listener for r in gh.requests}
            assert hosts == {"ghe", "api"}  # "api": the provider's direct token mint
            for mint in gh.mints:
                for text in (view.stdout, view.stderr, clone.stderr, push.stderr):
                    assert mint.token not in text
    finally:
        shutil.rmtree(short, ignore_errors=True)
