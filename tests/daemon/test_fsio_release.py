"""Replacing a big file: the old inode is released after the write, not lost or leaked.

``write_at`` holds a descriptor of a big file it replaces so the rename does
not free its blocks on the reply's path; a background thread closes it. The
new bytes and the old mode must land as for any write, and the descriptor
must be closed (nothing keeps a deleted inode, and its disk space, alive).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from airlock.daemon import fsio
from airlock.daemon.context import DaemonConfig
from airlock.daemon.workspace import Workspace
from tests.fakes.wait import wait_until_sync


def _workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    return Workspace(
        DaemonConfig(workspace=root, artifacts_dir=tmp_path / "a", state_dir=tmp_path / "s")
    )


def _fds_on(inode: int, device: int) -> list[int]:
    held = []
    for entry in os.listdir("/proc/self/fd"):
        try:
            st = os.stat(f"/proc/self/fd/{entry}")
        except OSError:
            continue
        if st.st_ino == inode and st.st_dev == device:
            held.append(int(entry))
    return held


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to see descriptors")
def test_a_replaced_big_file_lands_and_its_old_inode_is_released(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    target = ws.ctx.roots.workspace / "big.txt"
    old = b"old line\n" * (fsio.RELEASE_LATER_BYTES // 9 + 1)
    new = b"new line\n" * 1000
    target.write_bytes(old)
    target.chmod(0o640)
    before = target.stat()
    resolved = ws.ctx.resolve("big.txt", intent="write")
    with ws.ctx.roots.parent(resolved) as anchor:
        fsio.write_at(anchor, new, mode=None, owner=None, exclusive=False)
    after = target.stat()
    assert target.read_bytes() == new
    assert after.st_mode & 0o777 == 0o640
    assert after.st_ino != before.st_ino
    # The old inode's descriptor is closed by the background thread (a liveness wait,
    # not a timing claim: the deadline is far beyond any scheduling delay).
    with contextlib.suppress(AssertionError):
        wait_until_sync(lambda: not _fds_on(before.st_ino, before.st_dev))
    assert _fds_on(before.st_ino, before.st_dev) == []


def test_small_files_and_non_files_are_not_held(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    root = ws.ctx.roots.workspace
    (root / "small.txt").write_bytes(b"x\n")
    (root / "dir").mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert fsio._hold_replaced(fd, "small.txt", os.stat("small.txt", dir_fd=fd)) is None
        assert fsio._hold_replaced(fd, "dir", os.stat("dir", dir_fd=fd)) is None
        assert fsio._hold_replaced(fd, "absent", None) is None
    finally:
        os.close(fd)
