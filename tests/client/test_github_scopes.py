"""The lease each GitHub shell command gets, per command class, and the pushes approve() denies."""

from __future__ import annotations

import pytest

from airlock.client.github.argv import parse_command
from airlock.client.github.policy import approve
from airlock.client.github.scopes import (
    api_allow,
    git_allow,
    is_read_only_gh,
    push_denial,
    push_destinations,
)
from airlock.proxy.protocol import Allow, GitAllow, GraphQLAllow

REPO = "acme/widgets"
READ = Allow(methods=["GET", "HEAD"], graphql=GraphQLAllow(operations=["query"]))


def argv(command: str) -> list[str]:
    return parse_command(command)


@pytest.mark.parametrize(
    "command",
    [
        "gh pr view 12",
        "gh pr list",
        "gh pr diff 3",
        "gh pr checks 3",
        "gh pr status",
        "gh issue view 4",
        "gh issue list",
        "gh repo view acme/widgets",
        "gh run view 9",
        "gh run list",
        "gh run watch 9",
        "gh run download 9",
        "gh api repos/acme/widgets",
        "gh api -X GET repos/acme/widgets/pulls",
        "gh api --method=HEAD repos/acme/widgets",
        "gh api graphql -f query='{ viewer { login } }'",
    ],
)
def test_read_only_gh(command: str) -> None:
    assert is_read_only_gh(argv(command))
    assert api_allow(argv(command), REPO) == READ
    assert git_allow(argv(command), REPO) == Allow(git=GitAllow(repos=[REPO]))


@pytest.mark.parametrize(
    "command",
    [
        "gh pr create --title t --body b",
        "gh pr merge 3",
        "gh issue comment 4 --body x",
        "gh api -X POST repos/acme/widgets/issues",
        "gh api repos/acme/widgets/issues -f title=x",  # fields imply POST
        "gh release create v1",
    ],
)
def test_other_gh_get_the_repository_paths(command: str) -> None:
    assert not is_read_only_gh(argv(command))
    allow = api_allow(argv(command), REPO)
    assert allow is not None and allow.methods is None
    assert allow.paths is not None and "/repos/acme/widgets/**" in allow.paths
    assert allow.graphql == GraphQLAllow(operations=["query", "mutation"])


def test_enterprise_paths_carry_the_api_prefix() -> None:
    allow = api_allow(argv("gh pr create"), REPO, "ghe.example.test")
    assert allow is not None and allow.paths is not None
    assert "/api/v3/repos/acme/widgets/**" in allow.paths


def test_signed_commit_gets_paths_and_the_graphql_endpoint() -> None:
    allow = api_allow(argv("gh-signed-commit --repo acme/widgets -m x"), REPO)
    assert allow is not None and allow.paths is not None
    assert "/graphql" in allow.paths and allow.graphql is None


@pytest.mark.parametrize("command", ["git fetch origin", "git pull origin main", "git ls-remote"])
def test_git_reads_get_fetch_only_and_no_api_rule(command: str) -> None:
    assert api_allow(argv(command), REPO) is None
    assert git_allow(argv(command), REPO) == Allow(git=GitAllow(repos=[REPO]))


@pytest.mark.parametrize(
    ("command", "current", "refs"),
    [
        ("git push origin", "refs/heads/agent/x", ["refs/heads/agent/x"]),
        ("git push origin HEAD", "refs/heads/agent/x", ["refs/heads/agent/x"]),
        ("git push origin agent/y", None, ["refs/heads/agent/y"]),
        ("git push origin HEAD:refs/heads/agent/z", None, ["refs/heads/agent/z"]),
        ("git push -u origin a b:c", None, ["refs/heads/a", "refs/heads/c"]),
        ("git push origin v1:refs/tags/v1", None, ["refs/tags/v1"]),
    ],
)
def test_push_refs(command: str, current: str | None, refs: list[str]) -> None:
    assert push_destinations(argv(command), current) == refs
    assert git_allow(argv(command), REPO, current) == Allow(
        git=GitAllow(repos=[REPO], push_refs=refs)
    )


def test_push_from_a_detached_head_needs_a_destination() -> None:
    with pytest.raises(ValueError, match="detached"):
        push_destinations(argv("git push origin"), None)
    with pytest.raises(ValueError, match="wildcard"):
        push_destinations(argv("git push origin 'refs/heads/*:refs/heads/*'"), None)


@pytest.mark.parametrize(
    ("command", "needle"),
    [
        ("git push --force origin x", "force"),
        ("git push -f origin x", "force"),
        ("git push -uf origin x", "force"),
        ("git push --force-with-lease origin x", "force"),
        ("git push origin +x", "force"),
        ("git push origin +x:y", "force"),
        ("git push --mirror origin", "--mirror"),
        ("git push --all origin", "--all"),
        ("git push --tags origin", "--tags"),
        ("git push --follow-tags origin x", "--follow-tags"),
        ("git push --prune origin x", "--prune"),
        ("git push --delete origin x", "deleting"),
        ("git push -d origin x", "deleting"),
        ("git push origin :x", "deleting"),
        ("git push -o ci.skip origin x", "push options"),
        ("git push --push-option=x origin x", "push options"),
    ],
)
def test_approve_denies_dangerous_pushes(command: str, needle: str) -> None:
    assert push_denial(argv(command)) is not None
    verdict = approve(
        {
            "command": command,
            "description": "push",
            "permissions": [{"provider": "github", "repositories": [REPO], "access": "write"}],
        }
    )
    assert verdict != "not-applicable" and needle in verdict["reason"]


def test_plain_pushes_are_approved() -> None:
    for command in ["git push origin agent/x", "git push -u origin HEAD", "git push"]:
        assert push_denial(argv(command)) is None
