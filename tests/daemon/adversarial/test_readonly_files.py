"""Read-only files are refused (``read_only``, 403, nothing written); replacing a file
keeps its mode, owner and group; files the tools create belong to the exec user."""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.errors import AirlockError
from airlock.daemon.identity import ExecUser
from tests.daemon.adversarial.conftest import daemon_for, tree_digest
from tests.fakes.workspace import new_workspace

EDITS: list[tuple[str, dict[str, Any]]] = [
    ("file_write", {"path": "ro.txt", "content": "changed\n"}),
    ("file_patch", {"path": "ro.txt", "old_string": "original", "new_string": "changed"}),
    (
        "file_multi_patch",
        {
            "edits": [
                {"path": "rw.txt", "old_string": "writable", "new_string": "changed"},
                {"path": "ro.txt", "old_string": "original", "new_string": "changed"},
            ]
        },
    ),
    (
        "apply_patch",
        {
            "patch": "*** Begin Patch\n*** Update File: rw.txt\n@@\n-writable\n+changed\n"
            "*** Update File: ro.txt\n@@\n-original\n+changed\n*** End Patch\n"
        },
    ),
    ("apply_patch", {"patch": "*** Begin Patch\n*** Delete File: ro.txt\n*** End Patch\n"}),
]


async def test_read_only_file_is_refused_and_nothing_is_written(
    tmp_path: Path, resolver: str
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "ro.txt").write_text("original\n")
    (ws / "rw.txt").write_text("writable\n")
    os.chmod(ws / "ro.txt", 0o444)  # root-owned and 0444: the daemon (root) could write it
    before = tree_digest(ws)
    async with daemon_for(ws, resolver) as daemon, daemon.client() as client:
        for tool, args in EDITS:
            with pytest.raises(AirlockError) as info:
                await client.call(tool, args)
            assert info.value.code == "read_only", (tool, info.value.message)
            assert "read-only" in info.value.message and "ro.txt" in info.value.message
        # Reading (and previewing) a read-only file is fine.
        out = await client.call("file_read", {"path": "ro.txt"})
        assert out["content"] == "original\n"
    assert tree_digest(ws) == before


async def test_replace_keeps_mode_owner_and_group(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("this test gives files away with chown and needs root (the test image is)")
    nobody = pwd.getpwnam("nobody")
    ws = tmp_path / "ws"
    ws.mkdir()
    target = ws / "owned.txt"
    target.write_text("one\n")
    os.chown(target, nobody.pw_uid, nobody.pw_gid)
    os.chmod(target, 0o640)
    async with daemon_for(ws) as daemon, daemon.client() as client:
        await client.call("file_write", {"path": "owned.txt", "content": "two\n"})
        await client.call(
            "file_patch", {"path": "owned.txt", "old_string": "two", "new_string": "three"}
        )
        await client.call(
            "apply_patch",
            {
                "patch": "*** Begin Patch\n*** Update File: owned.txt\n@@\n-three\n+four\n"
                "*** End Patch\n"
            },
        )
    st = target.stat()
    assert target.read_text() == "four\n"
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert (st.st_uid, st.st_gid) == (nobody.pw_uid, nobody.pw_gid)


async def test_created_files_belong_to_the_exec_user(tmp_path: Path) -> None:
    """In process: the ``--exec-user`` flag lands with the privilege-separation half of
    this work; ``DaemonConfig.exec_user`` is what the file tools read."""
    if os.geteuid() != 0:
        pytest.fail("chowning to the exec user needs the daemon to run as root")
    nobody = pwd.getpwnam("nobody")
    ws = tmp_path / "ws"
    ws.mkdir()
    workspace = new_workspace(ws, tmp_path, exec_user=ExecUser.parse("nobody"))
    await workspace.call(
        "file_write",
        {"path": "new/dir/made.txt", "content": "x\n", "create_dirs": True, "diagnostics": False},
    )
    await workspace.call(
        "apply_patch",
        {
            "patch": "*** Begin Patch\n*** Add File: other/added.txt\n+y\n*** End Patch\n",
            "diagnostics": False,
        },
    )
    made = ["new", "new/dir", "new/dir/made.txt", "other", "other/added.txt"]
    for rel in made:
        st = (ws / rel).stat()
        assert (st.st_uid, st.st_gid) == (nobody.pw_uid, nobody.pw_gid), rel
