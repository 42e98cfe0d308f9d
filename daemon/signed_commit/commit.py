"""The airlock-signed-commit flow, step by step.

1. Parse arguments; require ``GH_TOKEN`` (the placeholder the GitHub shell tool
   sets); require ``origin`` to be the ``--repo`` repository.
2. Refuse unstaged changes to tracked files, before any network call.
3. Collect the staged changes (``git diff --cached --no-renames --name-status
   -z HEAD``): A/M/T become base64 additions with the staged bytes, D deletions;
   U, an empty stage, submodules and symlinks are refused.
4. Find the branch head on GitHub, creating the branch from ``--base`` (or the
   default branch) when it is missing.
5. ``createCommitOnBranch`` with ``expectedHeadOid``; when the branch moved in
   between, look the head up again and retry once; a second race is an error.
6. ``git fetch origin BRANCH``, check the fetched commit is the new one, and
   ``git reset --soft`` onto it (worktree and index stay as they are), then
   print the new commit's oid.
"""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO
from urllib.parse import urlsplit

from airlock.client.cli_common import error_line, peek_log_format

from .args import Options, is_oid, parse_args
from .errors import SignedCommitError
from .github import (
    Endpoints,
    GitHubClient,
    GraphQLError,
    NetworkError,
    ssl_context,
)
from .gitops import MODE_EXECUTABLE, Change, Git, basic_extraheader

MUTATION = """\
mutation($input: CreateCommitOnBranchInput!) {
  createCommitOnBranch(input: $input) {
    commit { oid url }
  }
}"""

NO_TOKEN = (
    "GH_TOKEN is not set. gh-signed-commit must be run through the GitHub shell tool "
    '(command: "gh-signed-commit --repo OWNER/REPO --branch BRANCH -m HEADLINE"), which '
    "supplies a credential for the duration of the command."
)


def origin_source(origin: str, repo: str, git_host: str) -> str:
    """What to fetch from: ``origin`` when it is the https URL of ``repo``,
    the canonical https URL when origin is its ssh form; refuse anything else.

    The check runs before any network call, so a checkout whose origin points
    elsewhere cannot make us commit to one repository and fetch from another.
    """
    canonical = f"https://{git_host}/{repo}.git"
    url = origin.strip()
    if url.startswith("git@") and ":" in url:
        host, _, path = url[len("git@") :].partition(":")
        scheme = "ssh"
    else:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        path = parts.path
        if scheme == "ssh":
            host = parts.hostname or ""
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")]
    expected_host = git_host.split(":")[0] if scheme == "ssh" else git_host
    if host.lower() != expected_host.lower() or path.lower() != repo.lower():
        raise SignedCommitError(
            f"origin is {url!r}, not the repository {repo} on {git_host}. gh-signed-commit "
            f"fetches the new commit from origin, so origin must be {canonical}."
        )
    return "origin" if scheme == "https" else canonical


def file_changes(changes: Sequence[Change]) -> dict[str, Any]:
    return {
        "additions": [
            {"path": c.path, "contents": base64.b64encode(c.contents).decode("ascii")}
            for c in changes
            if c.kind == "addition"
        ],
        "deletions": [{"path": c.path} for c in changes if c.kind == "deletion"],
    }


def resolve_head(client: GitHubClient, opts: Options, err: TextIO) -> str:
    """The branch head to build on, creating the branch when it is missing."""
    head = client.branch_head(opts.repo, opts.branch)
    if head is not None:
        if opts.base:
            print(f"note: branch {opts.branch} exists; --base {opts.base} ignored", file=err)
        return head
    base = opts.base or client.default_branch(opts.repo)
    if is_oid(base):
        base_sha = base
    else:
        found = client.branch_head(opts.repo, base)
        if found is None:
            raise SignedCommitError(
                f"base branch {base!r} does not exist in {opts.repo}; pass an existing branch "
                "or a full commit sha with --base"
            )
        base_sha = found
    if client.create_branch(opts.repo, opts.branch, base_sha):
        print(f"created branch {opts.branch} from {base} ({base_sha[:12]})", file=err)
        return base_sha
    # Someone created it between our lookup and our create: use theirs.
    head = client.branch_head(opts.repo, opts.branch)
    if head is None:
        raise SignedCommitError(f"branch {opts.branch} could neither be created nor found")
    return head


def create_commit(
    client: GitHubClient, opts: Options, changes: Sequence[Change], head: str, err: TextIO
) -> str:
    """``createCommitOnBranch``, retried once when the branch moved."""
    message: dict[str, str] = {"headline": opts.headline}
    if opts.body:
        message["body"] = opts.body
    files = file_changes(changes)
    for attempt in (1, 2):
        variables = {
            "input": {
                "branch": {"repositoryNameWithOwner": opts.repo, "branchName": opts.branch},
                "message": message,
                "expectedHeadOid": head,
                "fileChanges": files,
            }
        }
        try:
            data = client.graphql(MUTATION, variables)
        except NetworkError as exc:
            # The mutation is not idempotent: it may have landed before the
            # connection broke, so never retry it blindly.
            raise SignedCommitError(
                f"{exc} The commit may or may not have been created on {opts.branch}: check "
                f"with `git ls-remote origin refs/heads/{opts.branch}` (it was at {head}) "
                "before running gh-signed-commit again."
            ) from None
        except GraphQLError as exc:
            if not exc.is_stale_head:
                raise
            if attempt == 2:
                raise SignedCommitError(
                    f"branch {opts.branch} moved on GitHub while committing, twice in a row. "
                    f"Run `git fetch origin {opts.branch}`, rebase your work onto it, stage "
                    "your changes again and re-run gh-signed-commit. Nothing was committed."
                ) from None
            moved = client.branch_head(opts.repo, opts.branch)
            if moved is None:
                raise SignedCommitError(
                    f"branch {opts.branch} disappeared on GitHub while committing"
                ) from None
            print(
                f"note: branch {opts.branch} moved from {head[:12]} to {moved[:12]}; retrying once",
                file=err,
            )
            head = moved
            continue
        oid = _commit_oid(data)
        if oid is None:
            raise SignedCommitError("GitHub did not return the new commit's oid")
        return oid
    raise AssertionError("unreachable")


def _commit_oid(data: Any) -> str | None:
    if not isinstance(data, Mapping):
        return None
    payload = data.get("createCommitOnBranch")
    commit = payload.get("commit") if isinstance(payload, Mapping) else None
    oid = commit.get("oid") if isinstance(commit, Mapping) else None
    return oid if isinstance(oid, str) and oid else None


def run(argv: Sequence[str], env: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    opts = parse_args(argv)
    token = (env.get("GH_TOKEN") or "").strip()
    if not token:
        raise SignedCommitError(NO_TOKEN)
    endpoints = Endpoints.from_env(env)
    with Git.discover() as git:
        oid = _commit_and_sync(git, opts, token, endpoints, env, err)
    print(oid, file=out)
    return 0


def _commit_and_sync(
    git: Git, opts: Options, token: str, endpoints: Endpoints, env: Mapping[str, str], err: TextIO
) -> str:
    git.guard_unstaged()
    source = origin_source(git.remote_url("origin"), opts.repo, endpoints.git_host)
    changes = git.staged_changes()
    local_head = git.head()
    for change in changes:
        if change.mode == MODE_EXECUTABLE:
            print(
                f"note: {change.path} is executable; createCommitOnBranch records file "
                "contents only, so GitHub may store it without the executable bit",
                file=err,
            )

    client = GitHubClient(endpoints, token, ssl_context(env))
    head = resolve_head(client, opts, err)
    if head != local_head:
        print(
            f"note: your HEAD is {local_head[:12]} but {opts.branch} on GitHub is at "
            f"{head[:12]}; the staged changes (relative to your HEAD) are applied on top of "
            f"{head[:12]}",
            file=err,
        )
    oid = create_commit(client, opts, changes, head, err)

    # git reaches github.com through the same proxy; unless the caller (the
    # GitHub shell tool) already configured an Authorization extraheader, send
    # the placeholder as Basic so the proxy can swap it.
    config: list[str] = []
    fetch_url = source if source != "origin" else f"https://{endpoints.git_host}/{opts.repo}.git"
    if not git.has_extraheader(fetch_url):
        config.append(f"http.https://{endpoints.git_host}/.extraheader={basic_extraheader(token)}")
    try:
        fetched = git.fetch(source, opts.branch, config=config)
    except SignedCommitError as exc:
        raise SignedCommitError(
            f"commit {oid} was created on {opts.branch}, but fetching it failed ({exc}). "
            f"Run `git fetch origin {opts.branch}` and `git reset --soft {oid}` yourself."
        ) from None
    if fetched != oid:
        raise SignedCommitError(
            f"commit {oid} was created, but origin's {opts.branch} is now {fetched} (someone "
            f"pushed after it); HEAD was left alone. Fetch and rebase before continuing."
        )
    git.reset_soft(oid)
    return oid


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point (``airlock-signed-commit``, ``gh-signed-commit`` in the sandbox)."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        return run(args, os.environ, sys.stdout, sys.stderr)
    except SignedCommitError as exc:
        fmt = peek_log_format(args)
        if fmt == "json":
            print(error_line("airlock-signed-commit", str(exc), fmt), file=sys.stderr)
        else:
            print(f"airlock-signed-commit: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
