"""``pyright_lsp.scan``: which Python files the long-lived checker watches, by the shared walker.

The scan decides whether a warm language server must be told that files
changed; it takes ``.py``/``.pyi`` files (a link to a file counts as that
file), and skips hidden folders, vendored trees and virtual environments.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airlock.daemon.diagnostics import pyright_lsp


def _tree(root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "a.py").write_text("a = 1\n")
    (root / "pkg" / "b.pyi").write_text("b: int\n")
    (root / "pkg" / "notes.txt").write_text("not python\n")
    (root / ".hidden.py").write_text("h = 1\n")
    for skipped in (".git", ".tox", "node_modules", "__pycache__", "site-packages"):
        (root / skipped).mkdir()
        (root / skipped / "x.py").write_text("x = 1\n")
    (root / "venv").mkdir()
    (root / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (root / "venv" / "v.py").write_text("v = 1\n")
    (root / "linked.py").symlink_to(root / "pkg" / "a.py")
    (root / "dangling.py").symlink_to(root / "gone.py")
    (root / "dir_link.py").symlink_to(root / "pkg")


def test_scan_takes_python_files_and_skips_vendored_trees(tmp_path: Path) -> None:
    _tree(tmp_path)
    found = pyright_lsp.scan(tmp_path)
    assert found is not None
    assert sorted(Path(p).relative_to(tmp_path).as_posix() for p in found) == [
        ".hidden.py",
        "linked.py",
        "pkg/a.py",
        "pkg/b.pyi",
    ]
    assert found[str(tmp_path / "linked.py")] == os.stat(tmp_path / "pkg" / "a.py").st_mtime_ns


@pytest.mark.parametrize(
    ("bound", "at_most"),
    [
        # 14 entries: every one a listed folder holds counts, skipped folders included.
        ("MAX_SCANNED_ENTRIES", 14),
        # 4 Python files (the link counts as one).
        ("MAX_SCANNED_FILES", 4),
    ],
)
def test_scan_gives_up_past_its_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bound: str, at_most: int
) -> None:
    _tree(tmp_path)
    monkeypatch.setattr(pyright_lsp, bound, at_most - 1)
    assert pyright_lsp.scan(tmp_path) is None
    monkeypatch.setattr(pyright_lsp, bound, at_most)
    assert pyright_lsp.scan(tmp_path) is not None
