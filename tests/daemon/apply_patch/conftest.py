"""Fixtures for the apply_patch tests: an in-process workspace and an ``apply`` shortcut."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.workspace import Workspace
from tests.fakes.workspace import open_workspace

Apply = Callable[..., Coroutine[Any, Any, dict[str, Any]]]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
async def workspace(ws: Path, tmp_path: Path) -> AsyncIterator[Workspace]:
    async with open_workspace(ws, tmp_path) as instance:
        yield instance


@pytest.fixture
def apply(workspace: Workspace) -> Apply:
    async def call(patch: str, **extra: Any) -> dict[str, Any]:
        result = await workspace.call("apply_patch", {"patch": patch, **extra})
        return result.model_dump(mode="json")

    return call
