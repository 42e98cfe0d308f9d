"""file_write: atomic, compare-and-swap, conventions and modes kept."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from airlock.daemon.errors import AirlockError
from tests.daemon.conftest import ToolCall


async def test_create_and_replace(tool_call: ToolCall, workspace_dir: Path) -> None:
    out = await tool_call("file_write", {"path": "new/dir/f.txt", "content": "hello\n"})
    assert out["created"] is True and out["bytes"] == 6
    assert out["sha256"] == hashlib.sha256(b"hello\n").hexdigest()
    assert "+hello" in out["diff"]
    out = await tool_call("file_write", {"path": "new/dir/f.txt", "content": "bye\n"})
    assert out["created"] is False and "-hello" in out["diff"] and "+bye" in out["diff"]
    assert (workspace_dir / "new/dir/f.txt").read_text() == "bye\n"
    assert not [p for p in (workspace_dir / "new/dir").iterdir() if p.name.startswith(".airlock")]


async def test_create_dirs_false(tool_call: ToolCall, workspace_dir: Path) -> None:
    with pytest.raises(AirlockError) as info:
        await tool_call(
            "file_write", {"path": "no/such/f.txt", "content": "x", "create_dirs": False}
        )
    assert info.value.code == "not_found"
    assert not (workspace_dir / "no").exists()


async def test_compare_and_swap(tool_call: ToolCall, workspace_dir: Path) -> None:
    f = workspace_dir / "cas.txt"
    f.write_text("v1\n")
    good = hashlib.sha256(b"v1\n").hexdigest()
    with pytest.raises(AirlockError) as info:
        await tool_call(
            "file_write", {"path": "cas.txt", "content": "v2\n", "expected_sha256": "0" * 64}
        )
    assert info.value.code == "stale_write"
    assert f.read_text() == "v1\n"
    await tool_call("file_write", {"path": "cas.txt", "content": "v2\n", "expected_sha256": good})
    assert f.read_text() == "v2\n"
    with pytest.raises(AirlockError) as info:
        await tool_call(
            "file_write", {"path": "absent.txt", "content": "x", "expected_sha256": good}
        )
    assert info.value.code == "stale_write"


async def test_mode_and_crlf_kept(tool_call: ToolCall, workspace_dir: Path) -> None:
    f = workspace_dir / "run.sh"
    f.write_bytes(b"#!/bin/sh\r\necho hi\r\n")
    os.chmod(f, 0o751)
    await tool_call("file_write", {"path": "run.sh", "content": "#!/bin/sh\necho bye\n"})
    assert f.read_bytes() == b"#!/bin/sh\r\necho bye\r\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o751


async def test_directory_target(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "d").mkdir()
    with pytest.raises(AirlockError) as info:
        await tool_call("file_write", {"path": "d", "content": "x"})
    assert info.value.code == "is_directory"


async def test_large_body_within_default_limit(tool_call: ToolCall, workspace_dir: Path) -> None:
    content = "y" * (3 * 1024 * 1024)
    out = await tool_call("file_write", {"path": "big.txt", "content": content})
    assert out["bytes"] == len(content)
