"""file_list: sorted tree to depth, ignore rules, hidden entries, exact truncation, symlinks."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.errors import InvalidRequest, NotFound, PathEscape
from airlock.daemon.workspace import Workspace
from tests.daemon.search.support import make_workspace, write


@pytest.fixture
def lister(ws: Path, tmp_path: Path) -> Workspace:
    write(
        ws,
        {
            ".gitignore": "build/\n*.pyc\n",
            ".env": "SECRET=1\n",
            "README.md": "hello\n",
            "src/app.py": "x = 1\n",
            "src/app.pyc": b"\x00\x01",
            "src/pkg/deep/mod.py": "y = 2\n",
            "src.txt": "s\n",
            "build/out.bin": "o\n",
            ".venv/.gitignore": "*\n",
            ".venv/bin/python": "#!\n",
        },
    )
    return make_workspace(ws, tmp_path)


async def listing(workspace: Workspace, **args: Any) -> dict[str, Any]:
    return (await workspace.call("file_list", args)).model_dump(mode="json")


def paths(out: dict[str, Any]) -> list[str]:
    return [e["path"] for e in out["entries"]]


async def test_default_depth_two_sorted_ignored_and_hidden_left_out(lister: Workspace) -> None:
    out = await listing(lister)
    assert out["entries"] == [
        {"path": "README.md", "type": "file", "size": 6},
        {"path": "src", "type": "dir", "size": None},
        {"path": "src/app.py", "type": "file", "size": 6},
        {"path": "src/pkg", "type": "dir", "size": None},
        {"path": "src.txt", "type": "file", "size": 2},
    ]
    assert out["truncated"] is False
    assert "include_ignored=true" in out["note"] and "build/" in out["note"]


async def test_depth(lister: Workspace) -> None:
    assert paths(await listing(lister, depth=1)) == ["README.md", "src", "src.txt"]
    deep = paths(await listing(lister, depth=4))
    assert "src/pkg/deep/mod.py" in deep and "src/pkg/deep" in deep


async def test_hidden_and_ignored_on_request(lister: Workspace) -> None:
    hidden = paths(await listing(lister, include_hidden=True))
    assert ".env" in hidden and ".gitignore" in hidden
    assert ".venv" in hidden and ".venv/bin" not in hidden  # the venv's own '*' applies
    everything = paths(await listing(lister, include_hidden=True, include_ignored=True))
    for expected in ("build", "build/out.bin", "src/app.pyc", ".venv/bin", ".venv/.gitignore"):
        assert expected in everything


async def test_limit_truncation_is_exact(lister: Workspace) -> None:
    four = await listing(lister, limit=4)
    assert len(four["entries"]) == 4 and four["truncated"] is True
    five = await listing(lister, limit=5)
    assert len(five["entries"]) == 5 and five["truncated"] is False


async def test_subdirectory_and_file_paths(lister: Workspace) -> None:
    assert paths(await listing(lister, path="src/pkg", depth=5)) == [
        "src/pkg/deep",
        "src/pkg/deep/mod.py",
    ]
    assert (await listing(lister, path="README.md"))["entries"] == [
        {"path": "README.md", "type": "file", "size": 6}
    ]


async def test_ignored_directory_named_explicitly(lister: Workspace) -> None:
    out = await listing(lister, path="build")
    assert paths(out) == ["build/out.bin"]
    assert "ignored" in out["note"]


async def test_symlinks_listed_not_followed(lister: Workspace, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, {"secret.txt": "s\n"})
    os.symlink(outside, ws / "out-link")
    os.symlink(ws / "src", ws / "in-link")
    os.symlink(ws / "missing", ws / "dangling")
    out = await listing(lister, depth=3)
    entries = {e["path"]: e for e in out["entries"]}
    assert entries["out-link"] == {"path": "out-link", "type": "symlink", "size": None}
    assert entries["in-link"]["type"] == "symlink"
    assert entries["dangling"]["type"] == "symlink"
    assert not any("secret" in p for p in entries)
    assert not any(p.startswith("in-link/") for p in entries)


async def test_path_escape_refused(lister: Workspace, ws: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path, ws / "up")
    for bad in ("up", "/etc", "../", "a\x00b"):
        with pytest.raises(PathEscape):
            await listing(lister, path=bad)


async def test_missing_path_and_bad_depth(lister: Workspace) -> None:
    with pytest.raises(NotFound):
        await listing(lister, path="nope")
    with pytest.raises(InvalidRequest):
        await listing(lister, depth=11)


async def test_inside_a_git_repo_with_info_exclude(lister: Workspace, ws: Path) -> None:
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / ".git" / "info").mkdir(exist_ok=True)
    (ws / ".git" / "info" / "exclude").write_text("src.txt\n")
    out = paths(await listing(lister, include_hidden=True))
    assert "src.txt" not in out and ".git" not in out
    assert "README.md" in out


async def test_sorted_component_wise_like_search(lister: Workspace) -> None:
    out = paths(await listing(lister, depth=3))
    # "src" and everything under it comes before "src.txt", as rg --sort path orders it.
    assert out.index("src/pkg/deep") < out.index("src.txt")


async def test_non_utf8_names_do_not_break_the_response(lister: Workspace, ws: Path) -> None:
    with open(os.path.join(os.fsencode(ws), b"bad-\xff.txt"), "wb") as handle:
        handle.write(b"needle\n")
    out = await listing(lister, depth=1)
    assert "bad-\ufffd.txt" in paths(out)
    found = (await lister.call("file_search", {"pattern": "needle"})).model_dump()
    assert found["files"] == ["bad-\ufffd.txt"]
