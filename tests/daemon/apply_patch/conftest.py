"""Fixtures for the apply_patch tests: an in-process workspace and an ``apply`` shortcut."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from airlock.daemon.workspace import Workspace

Apply = Callable[..., Coroutine[Any, Any, dict[str, Any]]]


@pytest.fixture
def apply(workspace: Workspace) -> Apply:
    async def call(patch: str, **extra: Any) -> dict[str, Any]:
        result = await workspace.call("apply_patch", {"patch": patch, **extra})
        return result.model_dump(mode="json")

    return call
