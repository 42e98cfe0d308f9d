"""The module-wide airlockd most daemon and client test modules start, as fixtures.

Starting airlockd costs seconds on a loaded machine, so a module that only
needs *a* daemon over an empty workspace shares one: ``daemon`` (module scope)
and ``client`` (a fresh ``DaemonClient`` per test). A module takes both with
``daemon, client = shared_daemon("name")`` and ``pytestmark =
pytest.mark.asyncio(loop_scope="module")`` so its tests run on the daemon's loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from airlock.client.daemon import DaemonClient
from tests.fakes.daemon_harness import RunningDaemon, running_daemon


def shared_daemon(name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(``daemon``, ``client``) fixtures; ``name`` prefixes the workspace's temporary directory."""

    @pytest_asyncio.fixture(scope="module", loop_scope="module", name="daemon")
    async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningDaemon]:
        workspace = tmp_path_factory.mktemp(name) / "ws"
        workspace.mkdir()
        async with running_daemon(workspace) as d:
            yield d

    @pytest_asyncio.fixture(loop_scope="module", name="client")
    async def client(daemon: RunningDaemon) -> AsyncIterator[DaemonClient]:
        async with daemon.client() as c:
            yield c

    return daemon, client
