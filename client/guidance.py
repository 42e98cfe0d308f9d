"""The short texts an orchestrator gives a model that uses airlock's tools.

Two pieces, both plain strings an orchestrator can put into a system prompt:

- :func:`tool_use_instructions`: how to read, search, edit and run things with
  the daemon's tools, never to print credentials, and to stop and report when
  access is denied. It names only the tools it is told the model has, so a
  read-only worker is never told to edit.
- :func:`pr_skill`: how to deliver work as a pull request, in one of two modes
  chosen by configuration:

  - ``"sandbox"``: credentials live in the sandbox's shell; the model runs
    ``gh`` and ``git`` itself with ``exec`` and opens a draft PR with
    ``gh pr create --draft``.
  - ``"brokered"``: the sandbox holds no credentials; every ``gh`` and
    ``git fetch|pull|push`` goes through the GitHub shell tool, commits to
    repositories that require verified signatures are made with
    ``gh-signed-commit``, and the PR body is written to a file first.

Each text names only the tools its mode has (:func:`mode_tools`): a model told
about a tool it does not have wastes turns trying to call it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from .github.models import TOOL_NAME as GITHUB_SHELL_TOOL

PRMode = Literal["sandbox", "brokered"]

SIGNED_COMMIT_COMMAND = "gh-signed-commit"

READ_ONLY_TOOLS: frozenset[str] = frozenset(
    {
        "file_read",
        "file_multi_read",
        "file_list",
        "file_search",
        "file_diff_preview",
        "diagnostics",
    }
)
EDIT_TOOLS: frozenset[str] = frozenset(
    {"file_write", "file_patch", "file_multi_patch", "apply_patch"}
)
DAEMON_TOOLS: frozenset[str] = READ_ONLY_TOOLS | EDIT_TOOLS | {"exec"}
# Every tool name a text could mention; tests check texts against this.
ALL_TOOL_NAMES: frozenset[str] = DAEMON_TOOLS | {GITHUB_SHELL_TOOL, SIGNED_COMMIT_COMMAND}

DEFAULT_BODY_FILE = "pr-body.md"

_MODE_ALIASES: dict[str, PRMode] = {
    "sandbox": "sandbox",
    "shell": "sandbox",
    "credentials": "sandbox",
    "sandbox_credentials": "sandbox",
    "direct": "sandbox",
    "brokered": "brokered",
    "broker": "brokered",
    "github_shell": "brokered",
}


def normalise_mode(mode: str) -> PRMode:
    """``"sandbox"`` or ``"brokered"`` (a few obvious aliases accepted)."""
    try:
        return _MODE_ALIASES[mode.strip().lower().replace("-", "_")]
    except KeyError:
        raise ValueError(f"unknown PR mode {mode!r}: use 'sandbox' or 'brokered'") from None


def mode_tools(mode: str, *, signed_commits: bool = True) -> frozenset[str]:
    """The tools (and tool-like commands) a model has in ``mode``."""
    if normalise_mode(mode) == "sandbox":
        return DAEMON_TOOLS
    extra = {GITHUB_SHELL_TOOL} | ({SIGNED_COMMIT_COMMAND} if signed_commits else set())
    return DAEMON_TOOLS | extra


# (tools the line needs, the line). A line is included only when the model has
# every tool it names.
_TOOL_LINES: tuple[tuple[frozenset[str], str], ...] = (
    (
        frozenset({"file_read"}),
        "Read a file with file_read before you change it; it pages by line "
        "(follow next_offset to continue, never guess line numbers).",
    ),
    (
        frozenset({"file_multi_read"}),
        "Read several related files at once with file_multi_read.",
    ),
    (
        frozenset({"file_search"}),
        "Find code with file_search (a plain string unless you need a regex; narrow "
        "it with path or glob) instead of running grep or find.",
    ),
    (frozenset({"file_list"}), "See what a folder holds with file_list."),
    (
        frozenset({"apply_patch", "file_patch"}),
        "Edit with apply_patch for changes spanning several hunks or files (Begin/End "
        "Patch format, a few unchanged context lines around each change), or with "
        "file_patch for one exact replacement (old_string must match exactly once; "
        "include more surrounding lines when it is ambiguous).",
    ),
    (
        frozenset({"file_write"}),
        "Use file_write only to create a new file or to replace a whole file on purpose.",
    ),
    (
        frozenset({"file_diff_preview"}),
        "Preview a risky multi-edit with file_diff_preview before applying it.",
    ),
    (
        frozenset({"apply_patch", "file_patch"}),
        "When an edit fails with hunk_not_found, stale_write or ambiguous_match, re-read "
        "the file and redo the edit against what is there now; never retry the same patch.",
    ),
    (
        frozenset({"diagnostics"}),
        "Every edit returns the problems it introduced; fix them before moving on, and "
        "use the diagnostics tool for a wider check.",
    ),
    (
        frozenset({"exec"}),
        "Run builds, tests and other programs with exec: argv is a list and no shell "
        "runs it, so pipes, redirections and $VARIABLES do not work; long output is cut "
        "to its tail.",
    ),
)

_CREDENTIALS = (
    "Never print, echo, log, write to a file or commit credentials: no tokens, "
    "passwords, private keys, `env` dumps or auth config files, and do not try to "
    "read, decode or work around the credentials you were given."
)
_DENIED = (
    "When access is denied (forbidden, path_escape, a denied or refused command, "
    "HTTP 401/403/407 from GitHub or the proxy), stop. Report what you tried and "
    "the exact error, and do not look for another way around the refusal."
)
_READ_ONLY = "You cannot change files here: report what you found and what should change."


def tool_use_instructions(tools: Iterable[str] | None = None) -> str:
    """How to use the tools in ``tools`` (default: every daemon tool)."""
    have = frozenset(DAEMON_TOOLS if tools is None else tools)
    lines = [text for needs, text in _TOOL_LINES if needs <= have]
    if not have & EDIT_TOOLS:
        lines.append(_READ_ONLY)
    lines += [_CREDENTIALS, _DENIED]
    return "Using the workspace tools:\n" + "\n".join(f"- {line}" for line in lines)


def _body_section(write_with: str, body_file: str) -> str:
    return (
        f"Write the PR description to {body_file} with {write_with} before creating the "
        "PR, in four short sections: a one-paragraph summary, then `## Why` (the problem "
        "and who it affects), `## Approach` (what you changed and the alternatives you "
        "rejected), `## Validation` (the exact commands you ran and their results). Keep "
        f"{body_file} out of your commits: stage files by name, never with `git add -A`."
    )


def _sandbox_skill(body_file: str) -> str:
    steps = [
        "Work on a new branch: `git switch -c <short-topic-branch>` (run git and gh with exec).",
        "Commit with `git add <files>` and `git commit -m <headline>`; push with "
        "`git push -u origin HEAD`.",
        _body_section("file_write", body_file),
        "Open the PR as a draft: `gh pr create --draft --title <headline> --body-file "
        f"{body_file}`. Then report the PR URL it prints.",
        "Credentials are configured in this shell already: never run `gh auth token`, "
        "`gh auth status --show-token`, or print git credential config.",
        "If a push or gh command is refused (401/403, protected branch), stop and report it.",
    ]
    return _skill_text("the shell (exec)", steps)


def _brokered_skill(body_file: str, signed_commits: bool, tool: str) -> str:
    steps = [
        f"This sandbox has no GitHub credentials. Run every gh command and every git "
        f"fetch, pull and push through the {tool} tool, with exactly one permission "
        '`{"provider": "github", "repositories": ["OWNER/REPO"], "access": "write"}` '
        "and a one-line description of why. Running them with exec fails for lack of "
        "credentials; do not try.",
        "Local git (switch, add, diff, status, log) runs with exec as usual. Work on a new "
        "branch: `git switch -c <short-topic-branch>`.",
    ]
    if signed_commits:
        steps.append(
            "This repository requires verified (signed) commits, so do not `git commit` "
            "and push. Stage exactly what you want (`git add <files>`, and leave nothing "
            f"unstaged in tracked files), then run through {tool}: `{SIGNED_COMMIT_COMMAND} "
            "--repo OWNER/REPO --branch <branch> -m <headline> -b <body>` (add `--base "
            "<branch>` to start the branch from something other than the default branch). "
            "It commits on GitHub, moves your HEAD onto the new commit and prints its id."
        )
    else:
        steps.append(
            "Commit with `git add <files>` and `git commit -m <headline>` (exec), then "
            f"push through {tool}: `git push origin HEAD:refs/heads/<branch>`."
        )
    steps += [
        _body_section("file_write", body_file),
        f"Open the PR as a draft through {tool}: `gh pr create --draft --repo OWNER/REPO "
        f"--head <branch> --title <headline> --body-file {body_file}` (commands are not "
        "run by a shell: no pipes, `$(...)` or newlines). Report the PR URL it prints.",
        f"If {tool} denies a command or GitHub refuses it, stop and report the reason; do "
        "not rephrase the command to get around a denial.",
    ]
    return _skill_text(f"the {tool} tool", steps)


def _skill_text(channel: str, steps: list[str]) -> str:
    numbered = "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1))
    return (
        f"Skill: deliver your work as a pull request (GitHub access through {channel}).\n{numbered}"
    )


def pr_skill(
    mode: str,
    *,
    signed_commits: bool = True,
    body_file: str = DEFAULT_BODY_FILE,
    github_tool: str = GITHUB_SHELL_TOOL,
) -> str:
    """The ``pr`` skill for ``mode`` (``"sandbox"`` or ``"brokered"``).

    ``signed_commits`` (brokered mode) says the repository requires verified
    signatures, so commits go through ``gh-signed-commit``.
    """
    if normalise_mode(mode) == "sandbox":
        return _sandbox_skill(body_file)
    return _brokered_skill(body_file, signed_commits, github_tool)


@dataclass(frozen=True)
class GuidanceConfig:
    """What the orchestrator configured for one model."""

    pr_mode: PRMode = "brokered"
    signed_commits: bool = True
    tools: frozenset[str] | None = None
    body_file: str = DEFAULT_BODY_FILE
    include_pr_skill: bool = True


def guidance(config: GuidanceConfig = GuidanceConfig()) -> str:
    """Tool-use instructions plus (optionally) the ``pr`` skill, as one text."""
    tools = config.tools if config.tools is not None else DAEMON_TOOLS
    parts = [tool_use_instructions(tools)]
    if config.include_pr_skill:
        parts.append(
            pr_skill(
                config.pr_mode, signed_commits=config.signed_commits, body_file=config.body_file
            )
        )
    return "\n\n".join(parts)
