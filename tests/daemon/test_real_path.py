"""``real_path_str`` (the kernel-first fast path) always agrees with ``os.path.realpath``."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from airlock.daemon.paths import real_path_str


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Files, directories and every kind of link the resolver meets."""
    root = tmp_path / "root"
    (root / "ws" / "src" / "pkg").mkdir(parents=True)
    (root / "ws" / "src" / "pkg" / "mod.py").write_text("x\n")
    (root / "ws" / "a.txt").write_text("a\n")
    (root / "out").mkdir()
    (root / "out" / "secret").write_text("s\n")
    os.mkfifo(root / "ws" / "fifo")
    links = {
        "ws/rel_file": "a.txt",
        "ws/abs_file": str(root / "ws" / "a.txt"),
        "ws/dir_link": "src/pkg",
        "ws/out_dir": "../out",
        "ws/out_file": str(root / "out" / "secret"),
        "ws/chain1": "chain2",
        "ws/chain2": "rel_file",
        "ws/dangling": "nowhere",
        "ws/dangling_out": str(root / "out" / "missing"),
        "ws/loop1": "loop2",
        "ws/loop2": "loop1",
        "ws/src/up": "..",
        "ws/src/pkg/self": ".",
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    return root


SEGMENTS = [
    "a.txt",
    "rel_file",
    "abs_file",
    "dir_link",
    "out_dir",
    "out_file",
    "chain1",
    "dangling",
    "dangling_out",
    "loop1",
    "src",
    "up",
    "pkg",
    "self",
    "mod.py",
    "secret",
    "fifo",
    "..",
    ".",
    "",
    "missing",
]


def test_agrees_with_realpath_on_every_short_combination(tree: Path) -> None:
    base = str(tree / "ws")
    checked = 0
    for depth in (1, 2, 3):
        for parts in itertools.product(SEGMENTS, repeat=depth):
            candidate = base + "/" + "/".join(parts)
            for variant in (candidate, candidate + "/", "/" + candidate):
                assert real_path_str(variant) == os.path.realpath(variant), variant
                checked += 1
    assert checked > 9000


def test_unlinked_file_falls_back(tree: Path) -> None:
    target = tree / "ws" / "a.txt"
    assert real_path_str(str(target)) == str(target)
    target.unlink()
    assert real_path_str(str(target)) == os.path.realpath(target)


def test_workspace_behind_a_symlink(tree: Path) -> None:
    os.symlink(tree / "ws", tree / "ws_link")
    path = str(tree / "ws_link" / "dir_link" / "mod.py")
    assert real_path_str(path) == str(tree / "ws" / "src" / "pkg" / "mod.py")
    assert real_path_str(path) == os.path.realpath(path)
