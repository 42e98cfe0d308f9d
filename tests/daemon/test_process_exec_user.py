"""exec, the stream core and background processes all run as ``exec_user`` when one is set."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from airlock.daemon.identity import ExecUser
from airlock.daemon.protocol import ExecInput, ProcessReadInput, ProcessStartInput
from airlock.daemon.tools.exec import run_exec
from airlock.daemon.workspace import Workspace
from tests.fakes.workspace import new_workspace

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


@pytest.fixture
async def as_nobody() -> AsyncIterator[tuple[Workspace, pwd.struct_passwd]]:
    nobody = pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="al-user-"))
    os.chmod(base, 0o755)
    workspace = base / "ws"
    workspace.mkdir(mode=0o755)
    ws = new_workspace(workspace, base, exec_user=ExecUser.parse("nobody"))
    yield ws, nobody
    await ws.aclose()
    shutil.rmtree(base, ignore_errors=True)


ID_SCRIPT = ["sh", "-c", 'echo "$(id -u) $(id -g) $HOME $USER"']


async def test_exec_and_stream_run_as_the_exec_user(
    as_nobody: tuple[Workspace, pwd.struct_passwd],
) -> None:
    ws, nobody = as_nobody
    want = f"{nobody.pw_uid} {nobody.pw_gid} {nobody.pw_dir} nobody\n"
    out = await ws.exec(ExecInput(argv=ID_SCRIPT))
    assert out.stdout == want
    seen: list[bytes] = []

    async def on_output(stream: str, data: bytes) -> None:
        seen.append(data)

    await run_exec(ws.ctx, ExecInput(argv=ID_SCRIPT), on_output=on_output)
    assert b"".join(seen).decode() == want


async def test_background_processes_run_as_the_exec_user(
    as_nobody: tuple[Workspace, pwd.struct_passwd],
) -> None:
    ws, nobody = as_nobody
    started = await ws.process_start(ProcessStartInput(argv=ID_SCRIPT))
    text = ""
    for _ in range(50):
        part = await ws.process_read(ProcessReadInput(id=started.id, wait_ms=1000))
        text = part.stdout
        if not part.running and text:
            break
    assert text == f"{nobody.pw_uid} {nobody.pw_gid} {nobody.pw_dir} nobody\n"
