"""Fixtures for file_search / file_list tests.

``engine`` is parametrised over ``rg`` and ``grep``, so every case using
``search_ws`` or ``call`` runs on both engines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.workspace import Workspace
from tests.daemon.search.support import Call, forced


@pytest.fixture(params=["rg", "grep"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def search_ws(
    monkeypatch: pytest.MonkeyPatch, ws: Path, tmp_path: Path, engine: str
) -> Workspace:
    return await forced(monkeypatch, ws, tmp_path, engine)


@pytest.fixture
def call(search_ws: Workspace) -> Call:
    async def run(name: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await search_ws.call(name, args)
        return result.model_dump(mode="json")

    return run
