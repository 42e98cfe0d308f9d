"""Helpers for file_search / file_list tests: workspaces with a forced search engine.

The grep fallback is forced with ``AIRLOCK_SEARCH_ENGINE`` the way an operator
(or a sandbox without rg) would get it.
"""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.search.engine import ENV_OVERRIDE, resolve_engine
from airlock.daemon.workspace import Workspace
from tests.fakes.trees import write_files
from tests.fakes.workspace import new_workspace

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def make_workspace(ws: Path, tmp: Path, **config: Any) -> Workspace:
    return new_workspace(ws, tmp, **config)


async def forced(
    monkeypatch: pytest.MonkeyPatch, ws: Path, tmp: Path, engine: str, **config: Any
) -> Workspace:
    """A workspace whose search engine was resolved with the override set to ``engine``."""
    if engine == "grep" and shutil.which("grep") is None:
        pytest.skip("grep is not installed")
    monkeypatch.setenv(ENV_OVERRIDE, engine)
    workspace = make_workspace(ws, tmp, **config)
    resolved = await resolve_engine(workspace.ctx)
    assert resolved is not None and resolved.engine == engine
    return workspace


write = write_files  # the search tests' name for it
