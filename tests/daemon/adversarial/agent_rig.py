"""A real airlockd as root with ``--exec-user nobody``, a write and a read token.

The layout the limits tests share: a workspace the exec user owns (so the
agent, attacking through ``exec``, can shape it), and a daemon directory
(socket, tokens, state, artifacts) it may enter but not write.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.daemon_harness import RunningDaemon, running_daemon

USER = "nobody"
WRITE = "w-" + "7" * 40
READ = "r-" + "5" * 40

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="the exec user split needs root: run the suite as root"
)


@dataclass
class AgentRig:
    top: Path
    workspace: Path
    base: Path
    tokens: Path
    daemon: RunningDaemon


def chown_to_agent(path: Path) -> None:
    user = pwd.getpwnam(USER)
    os.chown(path, user.pw_uid, user.pw_gid)


@asynccontextmanager
async def agent_daemon(
    extra_args: Sequence[str] = (), *, workspace: Path | None = None
) -> AsyncIterator[AgentRig]:
    """The daemon over ``workspace`` (a fresh agent-owned one by default)."""
    top = Path(tempfile.mkdtemp(prefix="al-lim-"))
    top.chmod(0o755)
    ws = workspace or top / "ws"
    if workspace is None:
        ws.mkdir()
        chown_to_agent(ws)
    base = top / "d"
    base.mkdir(mode=0o755)
    tokens = base / "tokens"
    tokens.write_text(f"{WRITE} write\n{READ} read\n")
    tokens.chmod(0o600)
    try:
        async with running_daemon(
            ws,
            base_dir=base,
            extra_args=["--exec-user", USER, "--token-file", str(tokens), *extra_args],
        ) as daemon:
            yield AgentRig(top, ws, base, tokens, daemon)
    finally:
        # rm walks by descriptor: shutil.rmtree recurses once per level (trees here are deep).
        subprocess.run(["rm", "-rf", "--one-file-system", str(top)], check=False)
