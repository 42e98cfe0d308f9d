"""A real airlockd as root with ``--exec-user nobody``, a write and a read token.

The layout the limits tests share: a workspace the exec user owns (so the
agent, attacking through ``exec``, can shape it), and a daemon directory
(socket, tokens, state, artifacts) it may enter but not write.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.daemon.adversarial.as_exec_user import USER, make_layout
from tests.fakes.daemon_harness import RunningDaemon, running_daemon

WRITE = "w-" + "7" * 40
READ = "r-" + "5" * 40


@dataclass
class AgentRig:
    top: Path
    workspace: Path
    base: Path
    tokens: Path
    daemon: RunningDaemon


@asynccontextmanager
async def agent_daemon(
    extra_args: Sequence[str] = (), *, workspace: Path | None = None
) -> AsyncIterator[AgentRig]:
    """The daemon over ``workspace`` (a fresh agent-owned one by default)."""
    layout = make_layout(f"{WRITE} write\n{READ} read\n", "al-lim-", workspace)
    try:
        async with running_daemon(
            layout.workspace,
            base_dir=layout.base,
            extra_args=["--exec-user", USER, "--token-file", str(layout.tokens), *extra_args],
        ) as daemon:
            yield AgentRig(layout.top, layout.workspace, layout.base, layout.tokens, daemon)
    finally:
        # rm walks by descriptor: shutil.rmtree recurses once per level (trees here are deep).
        subprocess.run(["rm", "-rf", "--one-file-system", str(layout.top)], check=False)
