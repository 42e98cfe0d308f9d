"""The one process-group killer: every child the daemon starts leads its own group.

``exec``, search engines, git and the type checkers all start with
``start_new_session=True``, so their pid names the group that holds them and
whatever they forked without leaving it. A group that is already gone, or
whose members changed user, is not an error: there is nothing left to stop.
"""

from __future__ import annotations

import contextlib
import os
import signal


def kill_group(pgid: int) -> None:
    """SIGKILL process group ``pgid``; quietly nothing when it no longer exists."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
