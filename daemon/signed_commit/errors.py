"""The one exception type of airlock-signed-commit, carrying its exit status."""

from __future__ import annotations

EXIT_ERROR = 1
EXIT_USAGE = 2


class SignedCommitError(Exception):
    """A failure with a message written for the model that ran the command.

    Every message says what was wrong and what to do next; ``main`` prints it
    on stderr and exits with ``exit_code``.
    """

    def __init__(self, message: str, *, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code
