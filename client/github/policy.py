"""``approve`` and the target checks: what the GitHub shell tool will run at all.

Everything here is pure (argv and strings in, a reason out), so it runs before
any token is requested and is cheap to test exhaustively. The checks that need
the sandbox (git remote URLs, top-level directory) live in ``shell.py`` and
reuse :func:`remote_url_repo` from here.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

from pydantic import BaseModel

from .argv import CommandParseError, git_positionals, parse_command
from .scopes import push_denial

GIT_SUBCOMMANDS = frozenset({"fetch", "ls-remote", "pull", "push"})
EXECUTABLES = ("gh", "git", "gh-signed-commit")
_REPO_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
_ENV_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

# gh subcommands that would replace the tool's own credential handling.
_GH_AUTH_DENIED = frozenset({"login", "logout", "refresh", "setup-git", "switch"})
# gh repo subcommands whose first positional argument names a repository.
_GH_REPO_TARGETED = frozenset(
    {"clone", "view", "fork", "delete", "archive", "unarchive", "edit", "sync"}
)
# git options that run a program or redirect to another repository.
_GIT_DENIED_OPTIONS = ("--receive-pack", "--exec", "--upload-pack", "--repo", "--config")
# git options that take their value as the next argument, per subcommand.
_FETCH_VALUE_OPTS = frozenset(
    {
        "--depth",
        "--deepen",
        "--shallow-since",
        "--shallow-exclude",
        "-j",
        "--jobs",
        "-o",
        "--server-option",
        "--refmap",
        "--negotiation-tip",
        "--filter",
        "--submodule-prefix",
        "--recurse-submodules-default",
    }
)
_GIT_VALUE_OPTS: Mapping[str, frozenset[str]] = {
    "push": frozenset({"-o", "--push-option"}),
    "fetch": _FETCH_VALUE_OPTS,
    "pull": _FETCH_VALUE_OPTS | {"-s", "--strategy", "-X", "--strategy-option"},
    "ls-remote": frozenset({"-o", "--server-option", "--sort"}),
}


class DeniedResult(TypedDict):
    type: Literal["denied"]
    reason: str


Verdict = Literal["not-applicable"] | DeniedResult


def denied(reason: str) -> DeniedResult:
    return {"type": "denied", "reason": reason}


def _as_mapping(data: BaseModel | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(data, BaseModel):
        return data.model_dump()
    return data


def declared_repository(data: BaseModel | Mapping[str, Any]) -> str | DeniedResult:
    """The single "owner/repo" the call declares, or why the permissions are unacceptable."""
    perms = _as_mapping(data).get("permissions")
    if not isinstance(perms, list) or len(perms) != 1:
        count = len(perms) if isinstance(perms, list) else 0
        return denied(
            f"exactly one permission is required (got {count}): "
            '[{"provider": "github", "repositories": ["owner/repo"], "access": "write"}]'
        )
    perm = perms[0]
    if not isinstance(perm, Mapping):
        return denied("the permission must be an object")
    if perm.get("provider") != "github":
        return denied('the permission\'s provider must be "github"')
    if perm.get("access") != "write":
        return denied('the permission\'s access must be "write"')
    repos = perm.get("repositories")
    if not isinstance(repos, list) or len(repos) != 1:
        return denied('the permission must name exactly one repository as "owner/repo"')
    repo = repos[0]
    if not isinstance(repo, str) or not _REPO_RE.match(repo) or repo.endswith((".", ".git")):
        return denied(f'{repo!r} is not a repository name of the form "owner/repo"')
    return repo


def check_executable(argv: Sequence[str]) -> str | None:
    """Why ``argv`` may not run at all, or None when its executable and subcommand are allowed."""
    exe = argv[0]
    if _ENV_ASSIGN_RE.match(exe):
        return (
            f"environment assignments such as {exe.split('=')[0]}=... are not allowed; "
            "the tool sets the environment (including credentials) itself"
        )
    if exe == "gh":
        if len(argv) < 2 or argv[1].startswith("-"):
            return "gh needs a subcommand, e.g. `gh pr view 12`"
        if argv[1] == "auth" and len(argv) > 2 and argv[2] in _GH_AUTH_DENIED:
            return f"`gh auth {argv[2]}` is not needed: the tool provides credentials itself"
        return None
    if exe == "git":
        sub = argv[1] if len(argv) > 1 else ""
        if sub == "clone":
            return "git clone is not allowed; clone with `gh repo clone owner/repo`"
        if sub not in GIT_SUBCOMMANDS:
            shown = f"`git {sub}`" if sub else "git without a subcommand"
            return (
                f"{shown} is not allowed here; only git fetch, ls-remote, pull and push "
                "(run other git commands with the workspace's exec tool)"
            )
        for arg in argv[2:]:
            if arg == "--":
                break
            if arg.startswith(_GIT_DENIED_OPTIONS):
                return f"git option {arg.split('=')[0]} is not allowed"
        if sub == "push":
            return push_denial(argv)
        return None
    if exe == "gh-signed-commit":
        return None
    return (
        f"{exe!r} is not allowed: run gh (with a subcommand), git fetch/ls-remote/pull/push, "
        "or gh-signed-commit directly, without env, sudo, a shell or a path"
    )


def approve(data: BaseModel | Mapping[str, Any]) -> Verdict:
    """``"not-applicable"`` when the call is acceptable, else ``{"type": "denied", "reason"}``.

    Checks the input's shape (one github/write permission, a description), that
    the command parses, and that its executable and subcommand are allowed.
    """
    mapping = _as_mapping(data)
    repo = declared_repository(mapping)
    if not isinstance(repo, str):
        return repo
    description = mapping.get("description")
    if not isinstance(description, str) or not description.strip():
        return denied("a non-blank description of what the command does is required")
    if len(description) > 500:
        return denied("the description must be at most 500 characters")
    command = mapping.get("command")
    if not isinstance(command, str) or not command.strip():
        return denied("the command is empty")
    if len(command) > 20000:
        return denied("the command must be at most 20000 characters")
    try:
        argv = parse_command(command)
    except CommandParseError as exc:
        return denied(f"the command could not be parsed: {exc}")
    reason = check_executable(argv)
    if reason is not None:
        return denied(reason)
    return "not-applicable"


def _same_repo(a: str, b: str) -> bool:
    return a.lower() == b.lower()


def normalize_repo_arg(value: str, git_host: str = "github.com") -> str | None:
    """ "owner/repo" from a ``--repo`` value, a URL or ``HOST/owner/repo``; None if not one."""
    from_url = remote_url_repo(value, git_host)
    if from_url is not None:
        return from_url
    parts = value.strip("/").split("/")
    if len(parts) == 3 and parts[0].lower() == git_host.lower():
        parts = parts[1:]
    if len(parts) == 2 and all(parts):
        repo = "/".join(parts)
        return repo.removesuffix(".git")
    return None


def _gh_repo_values(argv: Sequence[str]) -> list[str]:
    values: list[str] = []
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            break
        if arg in ("--repo", "-R"):
            values.append(argv[i + 1] if i + 1 < len(argv) else "")
            i += 2
            continue
        if arg.startswith("--repo="):
            values.append(arg.split("=", 1)[1])
        elif arg.startswith("-R") and len(arg) > 2:
            values.append(arg[2:].removeprefix("="))
        i += 1
    return values


def _first_positional(args: Sequence[str]) -> str | None:
    for arg in args:
        if arg == "--":
            continue
        if not arg.startswith("-"):
            return arg
    return None


def git_remote_index(argv: Sequence[str]) -> int | None:
    """Index in ``argv`` of git's remote argument (first positional), or None when absent."""
    value_opts = _GIT_VALUE_OPTS.get(argv[1], frozenset())
    return next((i for i, _ in git_positionals(argv, value_opts)), None)


def check_targets(
    argv: Sequence[str], repo: str, org: str, git_host: str = "github.com"
) -> str | None:
    """Why ``argv`` reaches beyond ``repo``/``org``, or None. Needs no network and no sandbox."""
    owner = repo.split("/", 1)[0]
    if owner.lower() != org.lower():
        return f"{repo} is outside the organization {org}; only {org}/... repositories are allowed"
    exe = argv[0]
    if exe == "gh":
        for value in _gh_repo_values(argv):
            named = normalize_repo_arg(value, git_host)
            if named is None or not _same_repo(named, repo):
                return f"--repo {value!r} is not the declared repository {repo}"
        if len(argv) > 2 and argv[1] == "repo" and argv[2] in _GH_REPO_TARGETED:
            target = _first_positional(argv[3:])
            if target is not None:
                named = normalize_repo_arg(target, git_host)
                if named is None or not _same_repo(named, repo):
                    return f"gh repo {argv[2]} {target!r} is not the declared repository {repo}"
            elif argv[2] == "clone":
                return f"name the repository to clone: gh repo clone {repo}"
        return None
    if exe == "gh-signed-commit":
        values = _gh_repo_values(argv)
        if not values:
            return f"gh-signed-commit must name the repository: --repo {repo}"
        for value in values:
            named = normalize_repo_arg(value, git_host)
            if named is None or not _same_repo(named, repo):
                return f"--repo {value!r} is not the declared repository {repo}"
        return None
    if exe == "git":
        idx = git_remote_index(argv)
        if idx is not None and argv[idx] != "origin":
            return (
                f"git must use the remote origin (got {argv[idx]!r}); e.g. git {argv[1]} origin ..."
            )
        return None
    return f"{exe!r} is not allowed"


def with_origin(argv: Sequence[str]) -> list[str]:
    """git argv with ``origin`` made explicit when no remote was named."""
    out = list(argv)
    if git_remote_index(out) is None:
        if "--" in out[2:]:
            out.insert(out.index("--", 2), "origin")
        else:
            out.append("origin")
    return out


def remote_url_repo(url: str, git_host: str = "github.com") -> str | None:
    """ "owner/repo" when ``url`` is a canonical https or scp-style URL on ``git_host``."""
    host = re.escape(git_host)
    m = re.fullmatch(
        rf"https://{host}/([A-Za-z0-9-]+/[A-Za-z0-9._-]+?)(?:\.git)?/?", url, flags=re.IGNORECASE
    ) or re.fullmatch(
        rf"git@{host}:([A-Za-z0-9-]+/[A-Za-z0-9._-]+?)(?:\.git)?", url, flags=re.IGNORECASE
    )
    return m.group(1) if m else None


def resolve_working_directory(workspace: str, working_directory: str | None) -> str | None:
    """The absolute sandbox path to run in, or None when it leaves the workspace.

    Decided lexically (components, not string prefixes); the sandbox side
    checks symlinks (airlockd resolves ``cwd`` against its roots).
    """
    root = posixpath.normpath(workspace)
    wd = working_directory or "."
    if "\x00" in wd:
        return None
    if wd.startswith("~"):
        return None
    path = posixpath.normpath(posixpath.join(root, wd))
    if path == root or path.startswith(root.rstrip("/") + "/"):
        return path
    return None
