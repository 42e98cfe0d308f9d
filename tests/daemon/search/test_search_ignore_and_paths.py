"""Ignore rules and their notes; path containment; refusals (bad regex, unknown type)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airlock.daemon.errors import InvalidRequest, NotFound, PathEscape
from airlock.daemon.workspace import Workspace
from tests.daemon.search.support import Call, forced, make_workspace, write


@pytest.fixture
def venv_tree(ws: Path) -> None:
    write(
        ws,
        {
            "app.py": "import requests\n",
            ".gitignore": "build/\n*.log\n!keep.log\n",
            "build/out.py": "import requests\n",
            "debug.log": "requests failed\n",
            "keep.log": "requests kept\n",
            # What `python -m venv` writes: a .gitignore that ignores the whole venv.
            ".venv/.gitignore": "# created by venv\n*\n",
            ".venv/lib/site-packages/requests/__init__.py": "def requests_get(): ...\n",
        },
    )


@pytest.mark.usefixtures("venv_tree")
async def test_gitignore_honoured_and_venv_note(call: Call) -> None:
    out = await call("file_search", {"pattern": "requests"})
    assert out["files"] == ["app.py", "keep.log"]
    assert ".venv/" in out["note"] and "include_ignored=true" in out["note"]


@pytest.mark.usefixtures("venv_tree")
async def test_include_ignored_searches_everything(call: Call) -> None:
    out = await call("file_search", {"pattern": "requests", "include_ignored": True})
    assert out["files"] == [
        ".venv/lib/site-packages/requests/__init__.py",
        "app.py",
        "build/out.py",
        "debug.log",
        "keep.log",
    ]
    assert out["note"] is None


@pytest.mark.usefixtures("venv_tree")
async def test_searching_inside_the_venv_says_why_nothing_came_back(call: Call) -> None:
    out = await call("file_search", {"pattern": "requests_get", "path": ".venv/lib"})
    assert out["files"] == []
    assert "include_ignored=true" in out["note"] and ".venv" in out["note"]
    found = await call(
        "file_search", {"pattern": "requests_get", "path": ".venv/lib", "include_ignored": True}
    )
    assert found["files"] == [".venv/lib/site-packages/requests/__init__.py"]


@pytest.mark.usefixtures("venv_tree")
async def test_path_inside_ignored_directory_has_a_note(call: Call) -> None:
    out = await call("file_search", {"pattern": "requests", "path": "build"})
    # Named explicitly, it is searched (as rg does), and the note says it is ignored.
    assert out["files"] == ["build/out.py"]
    assert "build" in out["note"] and ".gitignore" in out["note"]


async def test_no_match_note_mentions_ignored_files(call: Call, ws: Path) -> None:
    write(ws, {".gitignore": "gen/\n", "gen/x.txt": "secret-token\n", "a.txt": "a\n"})
    out = await call("file_search", {"pattern": "secret-token"})
    assert out["files"] == []
    assert "include_ignored=true" in out["note"]


async def test_gitignore_inside_a_real_git_repo(call: Call, ws: Path) -> None:
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    write(ws, {".gitignore": "*.tmp\n", "a.tmp": "needle\n", "sub/b.txt": "needle\n"})
    (ws / ".git" / "info").mkdir(exist_ok=True)
    (ws / ".git" / "info" / "exclude").write_text("sub/private/\n")
    write(ws, {"sub/private/c.txt": "needle\n"})
    out = await call("file_search", {"pattern": "needle"})
    assert out["files"] == ["sub/b.txt"]


async def test_hidden_files_are_searched(call: Call, ws: Path) -> None:
    write(ws, {".github/workflows/ci.yml": "run: needle\n"})
    out = await call("file_search", {"pattern": "needle"})
    assert out["files"] == [".github/workflows/ci.yml"]


async def test_symlinked_path_out_of_workspace_is_path_escape(
    search_ws: Workspace, ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    write(outside, {"secret.txt": "needle\n"})
    os.symlink(outside, ws / "link-out")
    with pytest.raises(PathEscape):
        await search_ws.call("file_search", {"pattern": "needle", "path": "link-out"})
    with pytest.raises(PathEscape):
        await search_ws.call("file_search", {"pattern": "needle", "path": "/etc"})
    with pytest.raises(PathEscape):
        await search_ws.call("file_search", {"pattern": "needle", "path": "../outside"})


async def test_symlink_inside_tree_is_not_followed_out(
    call: Call, ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    write(outside, {"secret.txt": "needle outside\n"})
    write(ws, {"in.txt": "needle inside\n"})
    os.symlink(outside, ws / "dir-link")
    os.symlink(outside / "secret.txt", ws / "file-link.txt")
    out = await call("file_search", {"pattern": "needle", "include_ignored": True})
    assert out["files"] == ["in.txt"]
    content = await call("file_search", {"pattern": "needle", "output_mode": "content"})
    assert [m["text"] for m in content["matches"]] == ["needle inside"]


async def test_symlink_inside_workspace_as_path_is_fine(call: Call, ws: Path) -> None:
    write(ws, {"real/a.txt": "needle\n"})
    os.symlink(ws / "real", ws / "alias")
    out = await call("file_search", {"pattern": "needle", "path": "alias"})
    assert out["files"] == ["real/a.txt"]


async def test_bad_regex_is_invalid_request(search_ws: Workspace, ws: Path) -> None:
    write(ws, {"a.txt": "x\n"})
    with pytest.raises(InvalidRequest) as err:
        await search_ws.call("file_search", {"pattern": "foo(bar"})
    assert "refused the query" in err.value.message
    assert err.value.details["stderr"]


async def test_unknown_type_is_invalid_request(search_ws: Workspace, ws: Path) -> None:
    write(ws, {"a.txt": "x\n"})
    with pytest.raises(InvalidRequest):
        await search_ws.call("file_search", {"pattern": "x", "type": "no-such-type"})


async def test_missing_path_is_not_found(search_ws: Workspace) -> None:
    with pytest.raises(NotFound):
        await search_ws.call("file_search", {"pattern": "x", "path": "nope"})


async def test_engine_error_with_output_is_a_partial_result(ws: Path, tmp_path: Path) -> None:
    """rg exit 2 with output (e.g. a file it could not read): rows kept, error in the note.

    Root reads every file whatever its mode, so the unreadable file is played by a
    stand-in engine that prints what rg prints in that case. The recount of the rows
    (run in the child's /proc/self/fd, search.recount) goes to the real rg.
    """
    write(ws, {"a.txt": "needle\n", "b.txt": "needle\n"})
    real = shutil.which("rg") or str(Path(sys.executable).parent / "rg")
    fake = tmp_path / "fake-rg"
    fake.write_text(
        "#!/bin/sh\n"
        f'case "$(pwd)" in /proc/*/fd) exec {real} "$@";; esac\n'
        "printf 'a.txt\\0'\n"
        "echo 'rg: ./b.txt: Permission denied (os error 13)' >&2\n"
        "exit 2\n"
    )
    fake.chmod(0o755)
    workspace = make_workspace(ws, tmp_path)
    workspace.ctx.engines["search"] = {
        "engine": "rg",
        "path": str(fake),
        "version": "14.1.0",
        "source": "path",
    }
    out = (await workspace.call("file_search", {"pattern": "needle"})).model_dump()
    assert out["files"] == ["a.txt"]
    assert "partial" in out["note"] and "Permission denied" in out["note"]


async def test_extra_root_results_are_absolute(
    monkeypatch: pytest.MonkeyPatch, ws: Path, tmp_path: Path, engine: str
) -> None:
    extra = tmp_path / "extra"
    write(extra, {"lib/x.py": "needle\n"})
    write(ws, {"a.py": "needle\n"})
    workspace = await forced(monkeypatch, ws, tmp_path, engine, extra_roots=(extra,))
    out = (
        await workspace.call("file_search", {"pattern": "needle", "path": str(extra)})
    ).model_dump()
    assert out["files"] == [str((extra / "lib" / "x.py").resolve())]
    listed = (await workspace.call("file_list", {"path": str(extra)})).model_dump()
    assert [e["path"] for e in listed["entries"]] == [
        str((extra / "lib").resolve()),
        str((extra / "lib" / "x.py").resolve()),
    ]
    # A relative path never resolves against an extra root.
    with pytest.raises(NotFound):
        await workspace.call("file_search", {"pattern": "needle", "path": "lib"})
