"""Fixtures for the apply_patch tests: an in-process workspace and an ``apply`` shortcut."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.context import DaemonConfig
from airlock.daemon.workspace import Workspace

Apply = Callable[..., Awaitable[dict[str, Any]]]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
async def workspace(ws: Path, tmp_path: Path) -> AsyncIterator[Workspace]:
    instance = Workspace(
        DaemonConfig(
            workspace=ws, artifacts_dir=tmp_path / "artifacts", state_dir=tmp_path / "state"
        )
    )
    yield instance
    await instance.ctx.diag.aclose()  # the diagnostics worker processes


@pytest.fixture
def apply(workspace: Workspace) -> Apply:
    async def call(patch: str, **extra: Any) -> dict[str, Any]:
        result = await workspace.call("apply_patch", {"patch": patch, **extra})
        return result.model_dump(mode="json")

    return call
