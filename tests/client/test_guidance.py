"""Guidance texts: each mode names only the tools that mode has, and says the
things the issue requires (edit/search tools, credentials, denial, draft PR,
body sections, gh-signed-commit for signed repositories)."""

from __future__ import annotations

import re

import pytest

from airlock.client.github.models import TOOL_NAME
from airlock.client.guidance import (
    ALL_TOOL_NAMES,
    DAEMON_TOOLS,
    READ_ONLY_TOOLS,
    GuidanceConfig,
    guidance,
    mode_tools,
    normalise_mode,
    pr_skill,
    tool_use_instructions,
)

DESIGN_TOOLS = {
    "file_read",
    "file_multi_read",
    "file_list",
    "file_search",
    "file_diff_preview",
    "diagnostics",
    "file_write",
    "file_patch",
    "file_multi_patch",
    "apply_patch",
    "exec",
}


def named_tools(text: str) -> set[str]:
    """Tool names mentioned as whole words (``exec`` is not ``executable``)."""
    return {
        name for name in ALL_TOOL_NAMES if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)
    }


def test_tool_universe_matches_the_design() -> None:
    assert DAEMON_TOOLS == DESIGN_TOOLS
    assert DESIGN_TOOLS | {TOOL_NAME, "gh-signed-commit"} == ALL_TOOL_NAMES


@pytest.mark.parametrize(
    ("mode", "signed"),
    [("sandbox", False), ("sandbox", True), ("brokered", True), ("brokered", False)],
)
def test_each_mode_names_only_its_tools(mode: str, signed: bool) -> None:
    text = guidance(GuidanceConfig(pr_mode=normalise_mode(mode), signed_commits=signed))
    assert named_tools(text) <= mode_tools(mode, signed_commits=signed)


def test_sandbox_mode_uses_the_shell_and_no_broker() -> None:
    text = pr_skill("sandbox")
    assert TOOL_NAME not in text and "gh-signed-commit" not in text
    assert "gh pr create --draft" in text
    assert "exec" in named_tools(text)
    assert "## Why" in text and "## Approach" in text and "## Validation" in text


def test_brokered_mode_goes_through_the_github_shell_tool() -> None:
    text = pr_skill("brokered", signed_commits=True)
    assert TOOL_NAME in named_tools(text)
    assert "gh-signed-commit --repo OWNER/REPO --branch" in text
    assert "gh pr create --draft --repo OWNER/REPO" in text
    assert "--body-file pr-body.md" in text
    for section in ("summary", "## Why", "## Approach", "## Validation"):
        assert section in text
    assert '"access": "write"' in text


def test_brokered_without_signature_requirement_pushes_through_the_tool() -> None:
    text = pr_skill("brokered", signed_commits=False)
    assert "gh-signed-commit" not in text
    assert "git push origin HEAD:refs/heads/<branch>" in text
    assert "gh-signed-commit" not in mode_tools("brokered", signed_commits=False)


def test_tool_use_instructions_cover_the_required_points() -> None:
    text = tool_use_instructions()
    for fragment in ("apply_patch", "file_patch", "file_search", "Never print", "stop"):
        assert fragment in text
    assert "credentials" in text and "access is denied" in text


def test_read_only_worker_is_not_told_to_edit_or_exec() -> None:
    text = tool_use_instructions(READ_ONLY_TOOLS)
    assert named_tools(text) <= READ_ONLY_TOOLS
    assert "cannot change files" in text
    assert "Never print" in text and "access is denied" in text


def test_tool_lines_follow_the_available_tools() -> None:
    text = tool_use_instructions({"file_read", "exec"})
    assert named_tools(text) == {"file_read", "exec"}


@pytest.mark.parametrize(
    ("alias", "mode"),
    [("shell", "sandbox"), ("Brokered", "brokered"), ("github-shell", "brokered")],
)
def test_mode_aliases(alias: str, mode: str) -> None:
    assert normalise_mode(alias) == mode


def test_unknown_mode_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown PR mode"):
        pr_skill("telepathy")


def test_texts_are_short() -> None:
    for mode in ("sandbox", "brokered"):
        assert len(guidance(GuidanceConfig(pr_mode=normalise_mode(mode)))) < 6000
