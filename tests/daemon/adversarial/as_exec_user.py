"""A real airlockd as root with ``--exec-user nobody``: the agent's commands run as nobody.

The layout mirrors a sandbox: a workspace the exec user owns, and the daemon's
own directory (socket, token file, state, artifacts) it may enter but not
write. Tests here attack through ``exec``/``process_start`` with ``sh`` and
coreutils (the test venv's interpreter is not readable by nobody).
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from airlock.client.daemon import DaemonClient
from tests.fakes.daemon_harness import RunningDaemon, running_daemon

TOKEN = "w-" + "7" * 40
USER = "nobody"

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to run airlockd with --exec-user (run the suite as root)"
)


@dataclass
class Layout:
    top: Path
    workspace: Path
    base: Path
    tokens: Path


def chown_to_agent(path: Path) -> None:
    user = pwd.getpwnam(USER)
    os.chown(path, user.pw_uid, user.pw_gid)


def make_layout(token_lines: str, prefix: str, workspace: Path | None = None) -> Layout:
    """A workspace the exec user owns (a fresh one unless ``workspace`` is given), and a
    daemon dir it may enter but not write, holding a 0600 token file of ``token_lines``.
    The caller removes ``top``."""
    top = Path(tempfile.mkdtemp(prefix=prefix))
    top.chmod(0o755)
    ws = workspace or top / "ws"
    if workspace is None:
        ws.mkdir()
        chown_to_agent(ws)
    base = top / "d"
    base.mkdir(mode=0o755)
    base.chmod(0o755)
    tokens = base / "tokens"
    tokens.write_text(token_lines)
    tokens.chmod(0o600)
    return Layout(top, ws, base, tokens)


@asynccontextmanager
async def daemon_as_root(
    extra_args: Sequence[str] = (),
) -> AsyncIterator[tuple[RunningDaemon, DaemonClient]]:
    layout = make_layout(f"{TOKEN} write\n", "al-lim-")
    try:
        args = ["--exec-user", USER, "--token-file", str(layout.tokens), *extra_args]
        async with (
            running_daemon(layout.workspace, base_dir=layout.base, extra_args=args) as d,
            d.client(TOKEN) as c,
        ):
            yield d, c
    finally:
        shutil.rmtree(layout.top, ignore_errors=True)


def cap_effective(pid: int | str, bit: int) -> bool:
    """Whether ``pid`` holds capability ``bit`` (``CapEff`` in ``/proc/PID/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> bit & 1)
    return False


def status_field(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return ""
