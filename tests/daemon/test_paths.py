"""Every way out of the workspace is refused with path_escape, and nothing is touched."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.context import DaemonConfig
from airlock.daemon.errors import AirlockError, PathEscape
from airlock.daemon.paths import Roots
from airlock.daemon.workspace import Workspace
from tests.daemon.conftest import ToolCall
from tests.fakes.daemon_harness import running_daemon


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("secret\n")
    return out


def snapshot(root: Path) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            found[str(p.relative_to(root))] = (
                p.read_bytes() if p.is_file() and not p.is_symlink() else None
            )
    return found


async def expect_escape(call: ToolCall, name: str, args: dict[str, object]) -> None:
    with pytest.raises(AirlockError) as info:
        await call(name, args)
    assert info.value.code == "path_escape", info.value.message


WRITE_CASES: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
    ("file_write", lambda p: {"path": p, "content": "pwned\n"}),
    ("file_patch", lambda p: {"path": p, "old_string": "secret", "new_string": "pwned"}),
]


async def _assert_refused_everywhere(
    tool_call: ToolCall, path: str, workspace_dir: Path, outside: Path
) -> None:
    before_ws, before_out = snapshot(workspace_dir), snapshot(outside)
    await expect_escape(tool_call, "file_read", {"path": path})
    for name, args in WRITE_CASES:
        await expect_escape(tool_call, name, args(path))
    assert snapshot(workspace_dir) == before_ws
    assert snapshot(outside) == before_out


async def test_dotdot(tool_call: ToolCall, workspace_dir: Path, outside: Path) -> None:
    await _assert_refused_everywhere(tool_call, "../outside/secret.txt", workspace_dir, outside)


async def test_absolute_outside(tool_call: ToolCall, workspace_dir: Path, outside: Path) -> None:
    await _assert_refused_everywhere(tool_call, str(outside / "secret.txt"), workspace_dir, outside)


async def test_prefix_sibling_is_not_inside(
    tool_call: ToolCall, workspace_dir: Path, tmp_path: Path, outside: Path
) -> None:
    sibling = tmp_path / (workspace_dir.name + "2")
    sibling.mkdir()
    (sibling / "secret.txt").write_text("secret\n")
    await _assert_refused_everywhere(tool_call, str(sibling / "secret.txt"), workspace_dir, sibling)


async def test_symlinked_file_pointing_out(
    tool_call: ToolCall, workspace_dir: Path, outside: Path
) -> None:
    (workspace_dir / "link.txt").symlink_to(outside / "secret.txt")
    await _assert_refused_everywhere(tool_call, "link.txt", workspace_dir, outside)


async def test_symlinked_directory_pointing_out(
    tool_call: ToolCall, workspace_dir: Path, outside: Path
) -> None:
    (workspace_dir / "ldir").symlink_to(outside)
    await _assert_refused_everywhere(tool_call, "ldir/secret.txt", workspace_dir, outside)
    # A new file under the linked directory: refused before anything is created.
    await expect_escape(tool_call, "file_write", {"path": "ldir/new.txt", "content": "x"})
    await expect_escape(tool_call, "file_write", {"path": "ldir/sub/new.txt", "content": "x"})
    assert not (outside / "new.txt").exists()
    assert not (outside / "sub").exists()


async def test_dangling_symlink_pointing_out(
    tool_call: ToolCall, workspace_dir: Path, outside: Path
) -> None:
    (workspace_dir / "dangling").symlink_to(outside / "does-not-exist.txt")
    await expect_escape(tool_call, "file_write", {"path": "dangling", "content": "x"})
    await expect_escape(tool_call, "file_read", {"path": "dangling"})
    assert not (outside / "does-not-exist.txt").exists()


async def test_symlink_chain(tool_call: ToolCall, workspace_dir: Path, outside: Path) -> None:
    (workspace_dir / "b").symlink_to(outside / "secret.txt")
    (workspace_dir / "a").symlink_to(workspace_dir / "b")
    await _assert_refused_everywhere(tool_call, "a", workspace_dir, outside)


async def test_nul_byte(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "a.txt").write_text("a\n")
    await expect_escape(tool_call, "file_read", {"path": "a.txt\x00/../../etc/passwd"})
    await expect_escape(tool_call, "file_write", {"path": "x\x00y", "content": "z"})


async def test_home_outside_the_roots(tool_call: ToolCall, workspace_dir: Path) -> None:
    await expect_escape(tool_call, "file_read", {"path": "~/.profile"})
    await expect_escape(tool_call, "file_write", {"path": "~/airlock-test.txt", "content": "x"})
    assert not (Path.home() / "airlock-test.txt").exists()


async def test_symlink_inside_pointing_inside_is_fine(
    tool_call: ToolCall, workspace_dir: Path
) -> None:
    (workspace_dir / "real.txt").write_text("hello\n")
    (workspace_dir / "alias.txt").symlink_to(workspace_dir / "real.txt")
    out = await tool_call("file_read", {"path": "alias.txt"})
    assert out["content"] == "hello\n"
    assert out["path"] == "real.txt"


async def test_exec_cwd_escape(tool_call: ToolCall, outside: Path) -> None:
    await expect_escape(tool_call, "exec", {"argv": ["true"], "cwd": str(outside)})


async def test_writes_into_generated_files_are_refused(
    tool_call: ToolCall, workspace_dir: Path
) -> None:
    for path in ("package-lock.json", "node_modules/x/index.js", "app/dist/out.js", ".git/config"):
        with pytest.raises(AirlockError) as info:
            await tool_call("file_write", {"path": path, "content": "x"})
        assert info.value.code == "generated_file"
        assert not (workspace_dir / path).exists()
    # Only whole segments count.
    out = await tool_call("file_write", {"path": "src/distribute.ts", "content": "x\n"})
    assert out["created"] is True


async def test_granted_paths_open_one_call_only(tool_call: ToolCall, outside: Path) -> None:
    target = str(outside / "secret.txt")
    out = await tool_call("file_read", {"path": target, "granted_paths": [str(outside)]})
    assert out["content"] == "secret\n"
    await expect_escape(tool_call, "file_read", {"path": target})


# ------------------------------------------------------------- extra roots


def test_relative_path_never_resolves_against_an_extra_root(tmp_path: Path) -> None:
    ws, extra = tmp_path / "ws", tmp_path / "extra"
    ws.mkdir()
    extra.mkdir()
    (extra / "only-here.txt").write_text("x")
    roots = Roots(workspace=ws, extra=(extra,))
    assert roots.resolve(str(extra / "only-here.txt")).root == extra.resolve()
    resolved = roots.resolve("only-here.txt")
    assert resolved.real == ws.resolve() / "only-here.txt"
    with pytest.raises(PathEscape):
        roots.resolve("../extra/../../etc/passwd")


async def test_extra_root_over_socket(tmp_path: Path, workspace_dir: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "only-here.txt").write_text("extra\n")
    async with (
        running_daemon(workspace_dir, extra_args=["--extra-root", str(extra)]) as daemon,
        daemon.client() as client,
    ):
        out = await client.call("file_read", {"path": str(extra / "only-here.txt")})
        assert out["content"] == "extra\n"
        with pytest.raises(AirlockError) as info:
            await client.call("file_read", {"path": "only-here.txt"})
        assert info.value.code == "not_found"


async def test_artifacts_are_readable_but_not_writable(tmp_path: Path, workspace_dir: Path) -> None:
    ws = Workspace(
        DaemonConfig(
            workspace=workspace_dir, artifacts_dir=tmp_path / "art", state_dir=tmp_path / "st"
        )
    )
    (tmp_path / "art" / "spill.txt").write_text("spilled\n")
    out = await ws.call("file_read", {"path": str(tmp_path / "art" / "spill.txt")})
    assert out.model_dump()["content"] == "spilled\n"
    with pytest.raises(PathEscape):
        await ws.call("file_write", {"path": str(tmp_path / "art" / "spill.txt"), "content": "x"})
    assert (tmp_path / "art" / "spill.txt").read_text() == "spilled\n"
