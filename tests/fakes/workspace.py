"""The one in-process Workspace the daemon tests build, with the one right teardown.

``Workspace.aclose()`` stops everything the tools started (the diagnostics
worker and the I/O threads); closing only part of it leaks threads into later
tests. Every fixture that wants an in-process workspace goes through here.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from airlock.daemon.context import DaemonConfig
from airlock.daemon.workspace import Workspace


def new_workspace(root: Path, tmp: Path, **config: Any) -> Workspace:
    """A Workspace on ``root`` with its artifacts and journals under ``tmp`` (outside it)."""
    return Workspace(
        DaemonConfig(
            workspace=root, artifacts_dir=tmp / "artifacts", state_dir=tmp / "state", **config
        )
    )


@contextlib.asynccontextmanager
async def open_workspace(root: Path, tmp: Path, **config: Any) -> AsyncIterator[Workspace]:
    workspace = new_workspace(root, tmp, **config)
    try:
        yield workspace
    finally:
        await workspace.aclose()
