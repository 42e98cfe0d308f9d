"""Least privilege per command: the lease ``allow`` each GitHub shell command gets.

Derived from the parsed command, before anything runs:

======================================  ==========================================  ===========================
command                                 API rule (``api.github.com``)               git rule (``github.com``)
======================================  ==========================================  ===========================
read-only ``gh`` (:data:`READ_ONLY_GH`) ``GET``/``HEAD`` + GraphQL queries          fetch of the repository
other ``gh``                            the repository's REST paths (+ ``/user``)   fetch of the repository
                                        + GraphQL queries and mutations
``gh-signed-commit``                    the repository's REST paths + ``/graphql``  fetch of the repository
                                        (no GraphQL body rule: file contents
                                        travel in the mutation, often > 1 MiB)
``git fetch`` / ``pull`` / ``ls-remote``  none (no API rule at all)                 fetch of the repository
``git push``                            none                                        fetch + ``push_refs``: the
                                                                                    refspecs' destinations, or
                                                                                    the current branch
======================================  ==========================================  ===========================

``git push`` with force (``-f``, ``--force*``, ``+`` refspecs), ``--mirror``,
``--all``, ``--tags``, ``--follow-tags``, ``--prune``, deletions (``--delete``,
``-d``, ``:ref``) or push options (``-o``) is denied by ``approve()``
(:func:`push_denial`); the proxy would refuse the deletion and the push option
anyway, and cannot tell a force push from a fast-forward.
"""

from __future__ import annotations

from collections.abc import Sequence

from airlock.proxy.protocol import Allow, GitAllow, GraphQLAllow

from .argv import git_positionals

__all__ = [
    "READ_ONLY_GH",
    "api_allow",
    "git_allow",
    "is_read_only_gh",
    "push_denial",
    "push_destinations",
]

# (subcommand, sub-subcommand) pairs that only read.
READ_ONLY_GH: frozenset[tuple[str, str]] = frozenset(
    {
        ("pr", "view"),
        ("pr", "list"),
        ("pr", "diff"),
        ("pr", "checks"),
        ("pr", "status"),
        ("issue", "view"),
        ("issue", "list"),
        ("issue", "status"),
        ("repo", "view"),
        ("repo", "clone"),
        ("run", "view"),
        ("run", "list"),
        ("run", "watch"),
        ("run", "download"),
        ("release", "view"),
        ("release", "list"),
        ("release", "download"),
        ("workflow", "view"),
        ("workflow", "list"),
        ("label", "list"),
        ("cache", "list"),
        ("search", "*"),
        ("status", "*"),
        ("browse", "*"),
    }
)
_API_FIELD_OPTS = ("-f", "-F", "--field", "--raw-field", "--input")
_PUSH_VALUE_OPTS = frozenset({"--repo", "--receive-pack", "--exec", "-o", "--push-option"})
READ_METHODS = ["GET", "HEAD"]


def _gh_api_read_only(argv: Sequence[str]) -> bool:
    """``gh api`` with GET/HEAD (explicit, or implied: no fields), or ``gh api graphql``."""
    method: str | None = None
    fields = False
    positionals: list[str] = []
    i = 2
    while i < len(argv):
        arg = argv[i]
        if arg in ("-X", "--method"):
            method = argv[i + 1].upper() if i + 1 < len(argv) else ""
            i += 2
            continue
        if arg.startswith("--method="):
            method = arg.split("=", 1)[1].upper()
        elif arg.startswith("-X") and len(arg) > 2:
            method = arg[2:].upper()
        elif arg.startswith(_API_FIELD_OPTS):
            fields = True
        elif not arg.startswith("-"):
            positionals.append(arg)
        i += 1
    if positionals[:1] == ["graphql"]:
        return True  # the proxy lets queries through and refuses mutations
    if method is not None:
        return method in READ_METHODS
    return not fields


def is_read_only_gh(argv: Sequence[str]) -> bool:
    if len(argv) < 2 or argv[0] != "gh":
        return False
    if argv[1] == "api":
        return _gh_api_read_only(argv)
    sub = argv[2] if len(argv) > 2 else ""
    return (argv[1], sub) in READ_ONLY_GH or (argv[1], "*") in READ_ONLY_GH


def _api_prefix(api_host: str) -> str:
    return "" if api_host == "api.github.com" else "/api/v3"


def api_allow(argv: Sequence[str], repo: str, api_host: str = "api.github.com") -> Allow | None:
    """The API rule's ``allow`` for ``argv``; None means the command gets no API rule."""
    exe = argv[0]
    if exe == "git":
        return None
    if exe == "gh" and is_read_only_gh(argv):
        return Allow(methods=READ_METHODS, graphql=GraphQLAllow(operations=["query"]))
    prefix = _api_prefix(api_host)
    if exe == "gh-signed-commit":
        # createCommitOnBranch carries the files base64-encoded in its variables:
        # a GraphQL body rule (1 MiB bound) would refuse ordinary commits.
        graphql = "/api/graphql" if prefix else "/graphql"
        return Allow(paths=[f"{prefix}/repos/{repo}/**", graphql])
    return Allow(
        paths=[f"{prefix}/repos/{repo}/**", f"{prefix}/user", f"{prefix}/search/**"],
        graphql=GraphQLAllow(operations=["query", "mutation"]),
    )


def push_denial(argv: Sequence[str]) -> str | None:
    """Why a ``git push`` argv is refused outright, or None."""
    after_dashes = False
    i = 2
    while i < len(argv):
        arg = argv[i]
        if not after_dashes and arg == "--":
            after_dashes = True
        elif not after_dashes and arg.startswith("--"):
            name = arg.split("=", 1)[0]
            if name.startswith("--force") or name == "--force-if-includes":
                return "force pushes are not allowed; push a new branch instead"
            if name in ("--mirror", "--all", "--tags", "--follow-tags", "--prune"):
                return f"git push {name} is not allowed; push named branches"
            if name == "--delete":
                return "deleting remote refs is not allowed"
            if name == "--push-option":
                return "push options are not allowed"
            if name in _PUSH_VALUE_OPTS and "=" not in arg:
                i += 1
        elif not after_dashes and arg.startswith("-") and len(arg) > 1:
            flags = arg[1:]
            if "f" in flags:
                return "force pushes are not allowed; push a new branch instead"
            if "d" in flags:
                return "deleting remote refs is not allowed"
            if "o" in flags:
                return "push options are not allowed"
        elif arg.startswith("+"):
            return f"force refspecs ({arg!r}) are not allowed"
        elif ":" in arg and arg.split(":", 1)[0] == "":
            return f"deleting remote refs ({arg!r}) is not allowed"
        i += 1
    return None


def _refspecs(argv: Sequence[str]) -> list[str]:
    """Positional arguments after the remote (argv has an explicit remote)."""
    return [arg for _, arg in git_positionals(argv, _PUSH_VALUE_OPTS)][1:]


def _full_ref(name: str) -> str:
    if name.startswith("refs/"):
        return name
    return f"refs/heads/{name}"


def push_destinations(argv: Sequence[str], current_branch: str | None) -> list[str]:
    """The refs a push may update: each refspec's destination, or the current branch.

    ``current_branch`` is ``refs/heads/<name>`` (None when detached); raises
    ValueError when a destination cannot be known.
    """
    specs = _refspecs(argv)
    if not specs:
        if current_branch is None:
            raise ValueError(
                "HEAD is detached: name what to push, e.g. git push origin HEAD:refs/heads/BRANCH"
            )
        return [current_branch]
    out: list[str] = []
    for spec in specs:
        src, sep, dst = spec.partition(":")
        target = dst if sep else src
        if target == "HEAD" or target == "@":
            if current_branch is None:
                raise ValueError("HEAD is detached: push to a named branch (HEAD:refs/heads/NAME)")
            out.append(current_branch)
            continue
        if "*" in target:
            raise ValueError(f"wildcard refspecs ({spec!r}) are not allowed; name each branch")
        out.append(_full_ref(target))
    return sorted(set(out))


def git_allow(argv: Sequence[str], repo: str, current_branch: str | None = None) -> Allow:
    """The git rule's ``allow``: fetch of ``repo``, plus ``push_refs`` for a push."""
    if argv[0] == "git" and len(argv) > 1 and argv[1] == "push":
        refs = push_destinations(argv, current_branch)
        return Allow(git=GitAllow(repos=[repo], push_refs=refs))
    return Allow(git=GitAllow(repos=[repo]))
