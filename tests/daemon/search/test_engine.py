"""Engine resolution: rg on PATH, the wheel's rg, grep, or an install hint; shown in health."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from airlock.daemon.errors import Internal, InvalidRequest, PathEscape
from airlock.daemon.search.engine import ENV_OVERRIDE, INSTALL_HINT, resolve_engine
from tests.daemon.search.support import make_workspace, write
from tests.fakes.daemon_harness import running_daemon


def path_without_rg(tmp_path: Path) -> str:
    """A PATH holding only grep and sh: no rg anywhere on it."""
    bin_dir = tmp_path / "bin-no-rg"
    bin_dir.mkdir()
    for tool in ("grep", "sh"):
        found = shutil.which(tool)
        assert found is not None
        os.symlink(found, bin_dir / tool)
    return str(bin_dir)


async def test_startup_resolves_once_and_reports(
    monkeypatch: pytest.MonkeyPatch, ws: Path, tmp_path: Path
) -> None:
    monkeypatch.delenv(ENV_OVERRIDE, raising=False)
    workspace = make_workspace(ws, tmp_path)
    await workspace.startup()
    info = workspace.ctx.engines["search"]
    assert info["engine"] == "rg" and info["version"][0].isdigit()
    assert Path(info["path"]).name == "rg"
    # Cached: a changed environment does not change a running daemon's engine.
    monkeypatch.setenv(ENV_OVERRIDE, "none")
    again = await resolve_engine(workspace.ctx)
    assert again is not None and again.engine == "rg"


async def test_too_old_rg_on_path_is_passed_over(
    monkeypatch: pytest.MonkeyPatch, ws: Path, tmp_path: Path
) -> None:
    """An rg without --no-require-git (before 11) would ignore .gitignore outside git."""
    bin_dir = Path(path_without_rg(tmp_path))
    old = bin_dir / "rg"
    old.write_text("#!/bin/sh\necho 'ripgrep 0.10.0'\n")
    old.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv(ENV_OVERRIDE, raising=False)
    workspace = make_workspace(ws, tmp_path)
    engine = await resolve_engine(workspace.ctx)
    assert engine is not None and engine.source == "wheel" and engine.path != str(old)


@pytest.mark.parametrize("mode", ["files_with_matches", "content", "count"])
async def test_without_rg_on_path_the_wheel_rg_is_used(
    monkeypatch: pytest.MonkeyPatch, ws: Path, tmp_path: Path, mode: str
) -> None:
    monkeypatch.setenv("PATH", path_without_rg(tmp_path))
    monkeypatch.delenv(ENV_OVERRIDE, raising=False)
    workspace = make_workspace(ws, tmp_path)
    engine = await resolve_engine(workspace.ctx)
    assert engine is not None
    assert engine.engine == "rg" and engine.source == "wheel"
    write(ws, {"a.py": "needle\n", "b.py": "none\n"})
    out = (
        await workspace.call("file_search", {"pattern": "needle", "output_mode": mode})
    ).model_dump()
    assert out["engine"] == "rg" and out["total"] == 1


async def test_no_engine_gives_install_hint_and_other_tools_work(
    monkeypatch: pytest.MonkeyPatch, ws: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENV_OVERRIDE, "none")
    workspace = make_workspace(ws, tmp_path)
    await workspace.startup()
    assert workspace.ctx.engines["search"]["engine"] is None
    assert workspace.ctx.engines["search"]["hint"] == INSTALL_HINT
    write(ws, {"a.txt": "hello\n"})
    with pytest.raises(Internal) as err:
        await workspace.call("file_search", {"pattern": "hello"})
    assert "install ripgrep" in err.value.message
    listed = (await workspace.call("file_list", {})).model_dump()
    assert [e["path"] for e in listed["entries"]] == ["a.txt"]
    read = (await workspace.call("file_read", {"path": "a.txt"})).model_dump()
    assert read["content"].startswith("hello")


@pytest.mark.parametrize("forced", ["rg", "grep"])
async def test_over_the_socket(ws: Path, forced: str) -> None:
    write(ws, {"src/a.py": "alpha needle\n", "src/b.py": "beta\n", ".gitignore": "out/\n"})
    write(ws, {"out/c.py": "needle\n"})
    base = Path(tempfile.mkdtemp(prefix="al-s-"))
    try:
        async with (
            running_daemon(ws, base_dir=base, env={ENV_OVERRIDE: forced}) as daemon,
            daemon.client() as client,
        ):
            health = await client.health()
            assert health.engines["search"]["engine"] == forced
            files = await client.call("file_search", {"pattern": "needle"})
            assert files["files"] == ["src/a.py"] and files["engine"] == forced
            content = await client.call(
                "file_search", {"pattern": "needle", "output_mode": "content"}
            )
            assert content["matches"][0]["text"] == "alpha needle"
            counts = await client.call("file_search", {"pattern": "a", "output_mode": "count"})
            assert [c["path"] for c in counts["counts"]] == ["src/a.py", "src/b.py"]
            listed = await client.call("file_list", {"path": "src"})
            assert [e["path"] for e in listed["entries"]] == ["src/a.py", "src/b.py"]
            with pytest.raises(InvalidRequest):
                await client.call("file_search", {"pattern": "(unclosed"})
            with pytest.raises(PathEscape):
                await client.call("file_search", {"pattern": "x", "path": "/etc"})
            with pytest.raises(PathEscape):
                await client.call("file_list", {"path": "/etc"})
    finally:
        shutil.rmtree(base, ignore_errors=True)
