"""The GitHub shell tool's input and output models and its description for models.

The input schema is what an LLM sees as the tool's parameters, so its root is a
plain ``type: object`` and the field descriptions are written for a model.
``approve`` re-checks every constraint on loosely-typed input (a dict straight
from a model's tool call) so a malformed call is denied with a reason rather
than failing validation somewhere deep inside.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TOOL_NAME = "github_shell"

DESCRIPTION = """\
Run one `gh`, `git` or `gh-signed-commit` command against ONE GitHub repository, with \
credentials supplied for the duration of that command only.

- `command`: a single command line, e.g. `gh pr view 12 --comments`, \
`gh api repos/OWNER/REPO/pulls`, `git push origin HEAD:refs/heads/my-branch`, \
`gh-signed-commit --repo OWNER/REPO --branch my-branch -m "Fix typo"`. It is NOT run by a \
shell: quoting works as in sh ('single', "double", backslash), but pipes, redirections, \
`;`, `&&`, `$VAR`, `$(...)`, backticks and newlines are rejected. Do not prefix \
environment variables and do not wrap in `bash -c` or `env`.
- Allowed: `gh <subcommand> ...`; `git fetch|pull|push|ls-remote origin ...` (clone with \
`gh repo clone OWNER/REPO`); `gh-signed-commit --repo OWNER/REPO ...` for verified commits.
- `permissions`: exactly one entry, `{"provider": "github", "repositories": ["OWNER/REPO"], \
"access": "write"}`. Every `--repo`/`-R` and `gh repo clone|view|fork` target must be that \
repository, and git must use the remote `origin` pointing at it.
- `working_directory`: inside the workspace (default: the workspace root); for git and \
gh-signed-commit it must be the top level of the checkout.
- The credential reaches only what the command needs: read-only `gh` commands (view, list, \
diff, checks, `gh api` GET) cannot mutate; `git push` may update only the refs it names \
(or the current branch) and never force, `--mirror`, `--all`, `--tags`, delete or send push \
options. A request outside that is refused with 403 `lease_scope`.
- Output is stdout and stderr of the command (long output keeps the final 100000 bytes). \
Tokens never appear in the sandbox; do not try to read or print them.\
"""


class GitHubPermission(BaseModel):
    """One repository grant; the tool takes exactly one."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["github"] = Field(description='Always "github".')
    repositories: list[str] = Field(
        min_length=1,
        max_length=1,
        description='Exactly one repository as "owner/repo".',
    )
    access: Literal["write"] = Field(description='Always "write".')


class GitHubShellInput(BaseModel):
    """What a model sends to run one GitHub command."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(
        min_length=1,
        max_length=20000,
        description="One gh, git or gh-signed-commit command line (no shell syntax).",
    )
    permissions: list[GitHubPermission] = Field(
        min_length=1,
        max_length=1,
        description="Exactly one permission naming the repository the command acts on.",
    )
    description: str = Field(
        min_length=1,
        max_length=500,
        description="A short explanation of what the command does and why, for the log.",
    )
    working_directory: str | None = Field(
        default=None,
        description="Directory to run in, relative to the workspace (default: workspace root).",
    )


class GitHubShellResult(BaseModel):
    """The command's outcome, already redacted and truncated."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: int = 0


def input_schema() -> dict[str, Any]:
    """The JSON schema of :class:`GitHubShellInput` (root ``type: object``)."""
    schema = GitHubShellInput.model_json_schema()
    schema["type"] = "object"
    return schema
