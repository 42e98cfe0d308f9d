"""Only a socket file at --socket is ever replaced; anything else there refuses start-up."""

from __future__ import annotations

import asyncio
import grp
import os
import shutil
import socket
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.daemon_harness import airlockd_exit, running_daemon


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short directory under /tmp (socket paths are limited to 107 bytes), removed after."""
    path = Path(tempfile.mkdtemp(prefix="al-sc-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def start(workspace: Path, sock: Path) -> tuple[int, str]:
    return await airlockd_exit("--workspace", str(workspace), "--socket", str(sock))


async def test_regular_file_at_socket_path_refuses_start_and_is_kept(
    workspace_dir: Path, short_dir: Path
) -> None:
    base = short_dir
    target = base / "d.sock"
    target.write_text("precious data\n")
    code, err = await start(workspace_dir, target)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "is not a socket (a regular file)" in lines[0], err
    assert target.read_text() == "precious data\n"


async def test_directory_and_symlink_at_socket_path_refuse_start(
    workspace_dir: Path, short_dir: Path
) -> None:
    base = short_dir
    directory = base / "dir.sock"
    directory.mkdir()
    (directory / "keep").write_text("k")
    code, err = await start(workspace_dir, directory)
    assert code == 2 and "a directory" in err
    assert (directory / "keep").read_text() == "k"
    # A symlink to a stale socket is not replaced either (only a socket itself is).
    stale = base / "stale.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()
    link = base / "link.sock"
    link.symlink_to(stale)
    code, err = await start(workspace_dir, link)
    assert code == 2 and "a symlink" in err
    assert link.is_symlink() and stale.exists()


async def test_stale_socket_is_replaced(workspace_dir: Path, short_dir: Path) -> None:
    base = short_dir
    stale = base / "d.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()
    async with running_daemon(workspace_dir, base_dir=base) as d, d.client() as c:
        assert (await c.health()).status == "ok"
        assert f"replaced stale socket {stale}" in d.log()
        assert stat.S_ISSOCK(os.lstat(d.socket).st_mode)


async def test_socket_group_and_mode_let_the_orchestrator_in(workspace_dir: Path) -> None:
    async with running_daemon(
        workspace_dir, extra_args=["--socket-group", "nogroup", "--socket-mode", "0660"]
    ) as d:
        st = os.lstat(d.socket)
        assert st.st_gid == grp.getgrnam("nogroup").gr_gid
        assert stat.S_IMODE(st.st_mode) == 0o660


async def test_unknown_socket_group_is_a_one_line_refusal(
    workspace_dir: Path, short_dir: Path
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.daemon.cli", "--workspace", str(workspace_dir),
        "--socket", str(short_dir / "d.sock"),
        "--socket-group", "no-such-group-xyz",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    assert err.decode().strip().splitlines() == [
        "airlockd: --socket-group 'no-such-group-xyz': no such group on this machine"
    ]
