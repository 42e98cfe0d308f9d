"""airlock-signed-commit: verified commits from inside the sandbox.

Runs in the sandbox (as ``gh-signed-commit`` through the GitHub shell tool)
with the standard library only, so the sandbox image needs nothing extra. See
:mod:`airlock.daemon.signed_commit.commit` for the flow and
``docs/signed-commits.md`` for the design decisions.
"""

from .commit import main, run
from .errors import SignedCommitError

__all__ = ["SignedCommitError", "main", "run"]
