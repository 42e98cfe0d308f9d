"""A real airlockd split like production: run as root with ``--exec-user nobody`` when it can.

The terminal, watch and transfer tests share this layout: a workspace the exec
user owns, a daemon directory it may enter but not write, and a token file with
a write token and a read token. Without root (a developer's laptop) the daemon
runs as the current user and ``exec_user`` is None; tests that need the split
skip with that reason.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest_asyncio

from airlock.client.daemon import DaemonClient
from tests.fakes.daemon_harness import RunningDaemon, running_daemon

WRITE_TOKEN = "w-" + "7" * 40
READ_TOKEN = "r-" + "7" * 40
EXEC_USER = "nobody"
# A Python the exec user may run (the venv under a 0700 checkout is not one).
CHILD_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


@dataclass
class AgentDaemon:
    top: Path
    daemon: RunningDaemon
    exec_uid: int | None
    exec_gid: int | None

    @property
    def workspace(self) -> Path:
        return self.daemon.workspace

    def writer(self) -> DaemonClient:
        return self.daemon.client(WRITE_TOKEN)

    def reader(self) -> DaemonClient:
        return self.daemon.client(READ_TOKEN)


@contextlib.asynccontextmanager
async def agent_daemon(*extra_args: str) -> AsyncIterator[AgentDaemon]:
    split = os.geteuid() == 0
    top = Path(tempfile.mkdtemp(prefix="al-ag-"))
    try:
        top.chmod(0o755)
        workspace = top / "ws"
        workspace.mkdir()
        base = top / "d"
        base.mkdir(mode=0o755)
        tokens = base / "tokens"
        tokens.write_text(f"{WRITE_TOKEN} write\n{READ_TOKEN} read\n")
        tokens.chmod(0o600)
        args = ["--token-file", str(tokens), *extra_args]
        uid = gid = None
        if split:
            user = pwd.getpwnam(EXEC_USER)
            uid, gid = user.pw_uid, user.pw_gid
            os.chown(workspace, uid, gid)
            args += ["--exec-user", EXEC_USER]
        async with running_daemon(workspace, base_dir=base, extra_args=args) as daemon:
            yield AgentDaemon(top, daemon, uid, gid)
    finally:
        shutil.rmtree(top, ignore_errors=True)


# Shared fixtures (registered in tests/conftest.py): one daemon per test module, as
# root with the exec user where the suite runs as root, and a write-token client.


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def agent() -> AsyncIterator[AgentDaemon]:
    async with agent_daemon() as a:
        yield a


@pytest_asyncio.fixture(loop_scope="module")
async def agent_client(agent: AgentDaemon) -> AsyncIterator[DaemonClient]:
    async with agent.writer() as c:
        yield c
