"""GitHubShell failure paths that need neither gh nor the proxy."""

from __future__ import annotations

from pathlib import Path

from airlock.client.github.shell import GitHubShell
from airlock.client.proxy import ProxyClient
from airlock.client.sandboxes import LocalSandbox
from tests.fakes.github import FakeGitHub
from tests.fakes.github_proxy import app_provider


async def test_missing_installation_is_a_tool_error(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    provider = app_provider(fake_github, org="elsewhere")
    # The proxy is never reached: the token request fails first.
    proxy = ProxyClient(f"unix:{tmp_path / 'absent.sock'}")
    shell = GitHubShell(
        org="elsewhere",
        provider=provider,
        proxy=proxy,
        session="s1",
        sandbox=LocalSandbox(),
        workspace=str(tmp_path),
    )
    out = await shell.invoke(
        {
            "command": "gh pr view 1",
            "permissions": [
                {"provider": "github", "repositories": ["elsewhere/x"], "access": "write"}
            ],
            "description": "view",
        }
    )
    assert out["type"] == "error"
    assert "InstallationRequiredError" in out["reason"]
    assert "app installation is required" in out["reason"]
    assert fake_github.mints == []
    await proxy.aclose()


def test_definition_shape() -> None:
    definition = GitHubShell.input_schema()
    assert definition["type"] == "object"
    assert "command" in definition["properties"]
