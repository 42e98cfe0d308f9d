"""approve, target checks and working-directory checks (pure, before any token)."""

from __future__ import annotations

from typing import Any

import pytest

from airlock.client.github.argv import parse_command
from airlock.client.github.policy import (
    approve,
    check_targets,
    remote_url_repo,
    resolve_working_directory,
    with_origin,
)
from tests.fakes.github_proxy import WIDGETS_WRITE as PERM
from tests.fakes.github_proxy import shell_call


def call(command: str, **over: Any) -> dict[str, Any]:
    return shell_call(command, "look at the pull request", **over)


def test_plain_gh_command_is_not_applicable() -> None:
    assert approve(call("gh pr view 1")) == "not-applicable"
    assert approve(call("git push origin HEAD:refs/heads/x")) == "not-applicable"
    assert approve(call("gh-signed-commit --repo acme/widgets --branch b -m x")) == "not-applicable"


@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        ("gh", "subcommand"),
        ("gh --version", "subcommand"),
        ("GH_TOKEN=x gh auth status", "environment"),
        ("env GH_TOKEN=x gh auth status", "not allowed"),
        ("bash -lc gh", "not allowed"),
        ("sh -c 'gh pr view 1'", "not allowed"),
        ("/usr/bin/gh pr view 1", "not allowed"),
        ("git clone https://github.com/acme/widgets", "gh repo clone"),
        ("git status", "only git fetch"),
        ("git", "only git fetch"),
        ("git -c core.sshCommand=x push origin", "only git fetch"),
        ("git push --receive-pack=evil origin", "--receive-pack"),
        ("git fetch --upload-pack evil origin", "--upload-pack"),
        ("git push --repo=https://evil/x", "--repo"),
        ("gh auth login", "credentials"),
        ("gh pr view 1 | cat", "parsed"),
    ],
)
def test_denied_commands(command: str, fragment: str) -> None:
    verdict = approve(call(command))
    assert verdict != "not-applicable"
    assert verdict["type"] == "denied"
    assert fragment in verdict["reason"]


@pytest.mark.parametrize(
    "permissions",
    [
        [],
        [PERM, PERM],
        [{**PERM, "access": "read"}],
        [{**PERM, "provider": "gitlab"}],
        [{**PERM, "repositories": []}],
        [{**PERM, "repositories": ["acme/widgets", "acme/other"]}],
        [{**PERM, "repositories": ["not a repo"]}],
        [{**PERM, "repositories": ["../etc/passwd"]}],
    ],
)
def test_bad_permissions_denied(permissions: list[Any]) -> None:
    verdict = approve(call("gh pr view 1", permissions=permissions))
    assert verdict != "not-applicable" and verdict["type"] == "denied"


def test_missing_permissions_and_blank_description_denied() -> None:
    data = call("gh pr view 1")
    del data["permissions"]
    assert approve(data) != "not-applicable"
    assert approve(call("gh pr view 1", description="   ")) != "not-applicable"
    assert approve(call("gh pr view 1", description="x" * 501)) != "not-applicable"


@pytest.mark.parametrize(
    "command",
    [
        "gh pr view 1 --repo acme/other",
        "gh pr view 1 -R acme/other",
        "gh pr view 1 --repo=acme/other",
        "gh pr view 1 -Racme/other",
        "gh pr view 1 --repo github.com/acme/other",
        "gh repo clone acme/other",
        "gh repo view acme/other",
        "gh repo fork acme/other",
        "gh repo clone https://github.com/acme/other",
        "gh repo clone evil/widgets",
        "gh pr view 1 --repo",
        "gh-signed-commit --branch b -m x",
        "gh-signed-commit --repo acme/other --branch b -m x",
        "git push https://github.com/acme/other HEAD",
        "git fetch upstream",
        "git push --force evil main",
        "git fetch --depth 1 upstream main",
    ],
)
def test_targets_outside_the_declared_repository(command: str) -> None:
    reason = check_targets(parse_command(command), "acme/widgets", "acme")
    assert reason is not None


@pytest.mark.parametrize(
    "command",
    [
        "gh pr view 1",
        "gh pr view 1 --repo acme/widgets",
        "gh pr view 1 -R ACME/Widgets",
        "gh pr view 1 --repo=acme/widgets",
        "gh repo clone acme/widgets",
        "gh repo clone https://github.com/acme/widgets.git",
        "gh repo view",
        "gh-signed-commit --repo acme/widgets --branch b -m x",
        "git push origin HEAD:refs/heads/x",
        "git fetch --depth 1 origin main",
        "git pull --rebase origin main",
        "git fetch",
        "gh api repos/acme/widgets/pulls -f title=--repo",
    ],
)
def test_targets_inside_the_declared_repository(command: str) -> None:
    assert check_targets(parse_command(command), "acme/widgets", "acme") is None


def test_repository_outside_the_org() -> None:
    reason = check_targets(parse_command("gh pr view 1"), "other-org/widgets", "acme")
    assert reason is not None and "outside the organization" in reason
    assert check_targets(parse_command("gh pr view 1"), "ACME/widgets", "acme") is None


def test_origin_made_explicit() -> None:
    assert with_origin(["git", "fetch"]) == ["git", "fetch", "origin"]
    assert with_origin(["git", "push", "--force"]) == ["git", "push", "--force", "origin"]
    assert with_origin(["git", "push", "origin", "x"]) == ["git", "push", "origin", "x"]


@pytest.mark.parametrize(
    ("url", "repo"),
    [
        ("https://github.com/acme/widgets", "acme/widgets"),
        ("https://github.com/acme/widgets.git", "acme/widgets"),
        ("git@github.com:acme/widgets.git", "acme/widgets"),
        ("git@github.com:acme/widgets", "acme/widgets"),
        ("https://user@github.com/acme/widgets", None),
        ("https://github.com.evil.com/acme/widgets", None),
        ("http://github.com/acme/widgets", None),
        ("ssh://git@github.com/acme/widgets.git", None),
        ("https://github.com/acme/widgets/extra", None),
        ("ext::sh -c evil", None),
        ("/srv/repos/widgets.git", None),
    ],
)
def test_remote_url_repo(url: str, repo: str | None) -> None:
    assert remote_url_repo(url) == repo


def test_working_directory() -> None:
    assert resolve_working_directory("/ws", None) == "/ws"
    assert resolve_working_directory("/ws", "sub/dir") == "/ws/sub/dir"
    assert resolve_working_directory("/ws", "/ws/x") == "/ws/x"
    assert resolve_working_directory("/ws", "../outside") is None
    assert resolve_working_directory("/ws", "a/../../outside") is None
    assert resolve_working_directory("/ws", "/ws2") is None
    assert resolve_working_directory("/ws", "/etc") is None
    assert resolve_working_directory("/ws", "~/x") is None
