"""Command-line parsing for airlock-signed-commit.

argparse with abbreviations off (``--rep`` is not ``--repo``: a model's typo
must fail, not be guessed) and an error path that raises instead of exiting,
so ``main`` owns every exit and the message names the unknown argument.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from airlock.client.cli_common import add_common_flags

from .errors import EXIT_USAGE, SignedCommitError

PROG = "airlock-signed-commit"
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_HEX_OID = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


@dataclass(frozen=True)
class Options:
    repo: str
    branch: str
    headline: str
    body: str
    base: str | None

    @property
    def owner(self) -> str:
        return self.repo.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.repo.split("/", 1)[1]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:"):
            unknown = message.split(":", 1)[1].strip()
            message = (
                f"unknown argument(s): {unknown}. Accepted: --repo OWNER/REPO --branch BRANCH "
                "-m HEADLINE [-b BODY] [--base BRANCH_OR_SHA]"
            )
        raise SignedCommitError(f"{message}\n{self.format_usage().strip()}", exit_code=EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        allow_abbrev=False,
        description=(
            "Commit the staged changes to a GitHub branch as a verified (signed) commit "
            "through GitHub's createCommitOnBranch API, then move the local HEAD onto it. "
            "Run it through the GitHub shell tool as gh-signed-commit."
        ),
    )
    add_common_flags(parser)
    parser.add_argument("--repo", required=True, help="OWNER/REPO the commit goes to")
    parser.add_argument("--branch", required=True, help="branch to commit on (created if missing)")
    parser.add_argument("-m", "--message", required=True, help="commit headline (first line)")
    parser.add_argument("-b", "--body", default="", help="commit message body")
    parser.add_argument(
        "--base", default=None, help="branch or commit to create --branch from (default branch)"
    )
    return parser


def parse_args(argv: Sequence[str]) -> Options:
    """Parse and validate; raises :class:`SignedCommitError` (exit 2) on bad input."""
    ns = build_parser().parse_args(list(argv))
    repo = str(ns.repo).strip()
    if not _REPO.match(repo) or repo.split("/")[1] in (".", ".."):
        raise SignedCommitError(f"--repo must be OWNER/REPO, got {ns.repo!r}", exit_code=EXIT_USAGE)
    branch = str(ns.branch).strip()
    if branch.startswith("refs/heads/"):
        branch = branch[len("refs/heads/") :]
    if not _valid_branch(branch):
        raise SignedCommitError(
            f"--branch {ns.branch!r} is not a valid branch name", exit_code=EXIT_USAGE
        )
    # A multi-line -m is common; keep its first line as the headline and move
    # the rest in front of the body rather than refusing.
    message = str(ns.message).replace("\r\n", "\n").strip("\n")
    headline, _, rest = message.partition("\n")
    headline = headline.strip()
    if not headline:
        raise SignedCommitError("-m HEADLINE must not be empty", exit_code=EXIT_USAGE)
    body = "\n\n".join(part for part in (rest.strip("\n"), str(ns.body)) if part)
    base = str(ns.base).strip() if ns.base is not None else None
    if base is not None:
        if base.startswith("refs/heads/"):
            base = base[len("refs/heads/") :]
        if not (_HEX_OID.match(base) or _valid_branch(base)):
            raise SignedCommitError(
                f"--base {ns.base!r} is neither a branch name nor a full commit sha",
                exit_code=EXIT_USAGE,
            )
    return Options(repo=repo, branch=branch, headline=headline, body=body, base=base)


def is_oid(text: str) -> bool:
    return bool(_HEX_OID.match(text))


def _valid_branch(name: str) -> bool:
    """git check-ref-format's rules for a branch name, without running git."""
    if not name or name == "@" or name.startswith(("-", "/")) or name.endswith(("/", ".")):
        return False
    if any(ch in name for ch in " ~^:?*[\\\x7f") or any(ord(ch) < 32 for ch in name):
        return False
    if ".." in name or "@{" in name or "//" in name:
        return False
    return all(
        part and not part.startswith(".") and not part.endswith(".lock") for part in name.split("/")
    )
