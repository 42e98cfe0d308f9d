"""Fixtures for the daemon's tests: a workspace, the in-process API, and the real socket.

``tool_call`` is parametrised over both transports, so every case written
against it runs in-process *and* through a real airlockd on a Unix socket.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.workspace import Workspace
from tests.fakes.daemon_harness import running_daemon
from tests.fakes.workspace import open_workspace

ToolCall = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


@pytest.fixture
def workspace_dir(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def ws(workspace_dir: Path) -> Path:
    """The workspace folder, under the short name the apply_patch and search tests use."""
    return workspace_dir


@pytest.fixture
def ws_dir(workspace_dir: Path) -> Path:
    """The workspace folder, under the name the diagnostics tests use."""
    return workspace_dir


@pytest.fixture
async def in_process(workspace_dir: Path, tmp_path: Path) -> AsyncIterator[Workspace]:
    async with open_workspace(workspace_dir, tmp_path) as workspace:
        yield workspace


@pytest.fixture
def workspace(in_process: Workspace) -> Workspace:
    """The in-process workspace, under the name the apply_patch and diagnostics tests use."""
    return in_process


@pytest.fixture(params=["in_process", "socket"])
async def tool_call(
    request: pytest.FixtureRequest, workspace_dir: Path, in_process: Workspace
) -> AsyncIterator[ToolCall]:
    if request.param == "in_process":

        async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
            result = await in_process.call(name, args)
            return result.model_dump(mode="json")

        yield call
        return
    base = Path(tempfile.mkdtemp(prefix="al-t-"))
    async with running_daemon(workspace_dir, base_dir=base) as daemon, daemon.client() as client:
        yield client.call
