"""Inputs that used to give ``internal`` (or a misleading code) get a clear envelope:
symlink loops, a 1,500-deep tree, over-long names, ``a.txt/b`` when ``a.txt`` is a file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.errors import AirlockError
from tests.daemon.adversarial.conftest import daemon_for

DEPTH = 1500


def _deep(ws: Path) -> str:
    """A 1,500-deep chain of one-letter directories, made with dir fds (the path itself is
    longer than PATH_MAX, so it cannot be made by name)."""
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(DEPTH):
            os.mkdir("d", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        with open(os.open("f.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as handle:
            handle.write("deep\n")
    finally:
        os.close(fd)
    return "/".join(["d"] * DEPTH) + "/f.txt"


async def test_edge_inputs_get_envelopes(tmp_path: Path, resolver: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    (ws / "loop1").symlink_to("loop2")
    (ws / "loop2").symlink_to("loop1")
    deep = _deep(ws)
    long_name = "n" * 300 + ".txt"
    path_codes = {"invalid_request", "path_escape", "not_found"}
    cases: list[tuple[str, dict[str, Any], set[str]]] = [
        ("file_write", {"path": "a.txt/b", "content": "x\n"}, {"invalid_request"}),
        (
            "file_write",
            {"path": "a.txt/b/c", "content": "x\n", "create_dirs": True},
            {"invalid_request"},
        ),
        (
            "apply_patch",
            {"patch": "*** Begin Patch\n*** Add File: a.txt/b\n+x\n*** End Patch\n"},
            {"conflict", "invalid_request"},
        ),
        ("file_read", {"path": "loop1"}, path_codes),
        ("file_write", {"path": "loop1", "content": "x\n"}, path_codes),
        ("file_list", {"path": "loop1/x"}, path_codes),
        ("file_read", {"path": long_name}, {"invalid_request"}),
        ("file_write", {"path": long_name, "content": "x\n"}, {"invalid_request"}),
        ("file_read", {"path": deep}, {"ok", "invalid_request"}),
        ("file_write", {"path": deep, "content": "y\n"}, {"ok", "invalid_request"}),
        ("file_list", {"path": ".", "depth": 10, "limit": 5000}, {"ok"}),
        ("file_list", {"path": "/".join(["d"] * 1200), "depth": 10}, {"ok", "invalid_request"}),
        ("file_search", {"pattern": "deep", "path": "."}, {"ok"}),
    ]
    try:
        async with daemon_for(ws, resolver) as daemon, daemon.client() as client:
            for tool, args, allowed in cases:
                try:
                    await client.call(tool, args)
                    code = "ok"
                except AirlockError as exc:
                    code = str(exc.code)
                    assert code != "internal", (tool, str(args)[:120], exc.message[:300])
                assert code in allowed, (tool, str(args)[:120], code)
        assert (ws / "a.txt").read_text() == "a\n"
    finally:
        # shutil.rmtree (pytest's tmp cleanup) recurses once per level: remove it here.
        subprocess.run(["rm", "-rf", str(ws / "d")], check=True)


@pytest.mark.parametrize("length", [256, 5000])
async def test_over_long_names_under_every_reader(tmp_path: Path, length: int) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    name = "x" * length
    async with daemon_for(ws) as daemon, daemon.client() as client:
        for tool, args in [
            ("file_read", {"path": name}),
            ("file_list", {"path": name}),
            ("file_search", {"pattern": "x", "path": name}),
            ("file_patch", {"path": name, "old_string": "a", "new_string": "b"}),
        ]:
            with pytest.raises(AirlockError) as info:
                await client.call(tool, args)
            assert info.value.code in ("invalid_request", "not_found"), (tool, info.value.message)
