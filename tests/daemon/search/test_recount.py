"""The in-process literal count agrees with ``rg --count`` on the same bytes.

``search.recount`` counts a case-sensitive literal itself on the descriptor the
resolver opened; it must say what rg would have said (lines holding the bytes),
across chunk boundaries (a tiny chunk here), with or without a final newline,
and hand binary files (a NUL byte) back to the engine.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airlock.daemon.search import recount


def _rg() -> str:
    beside = Path(sys.executable).parent / "rg"
    found = str(beside) if beside.exists() else shutil.which("rg")
    if found is None:
        pytest.skip("rg is not installed (pip install ripgrep, or apt-get install ripgrep)")
    return found


def _rg_count(path: Path, needle: str) -> int:
    out = subprocess.run(
        [_rg(), "--no-config", "--count", "--fixed-strings", "--case-sensitive", "-e", needle,
         "--", str(path)],
        capture_output=True, text=True,
    )  # fmt: skip
    return int(out.stdout.strip() or 0)


@pytest.mark.parametrize("seed", range(6))
def test_literal_count_matches_rg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    monkeypatch.setattr(recount, "_CHUNK", 7)
    rng = random.Random(seed)
    needle = "ab" if seed % 2 else "abcab"
    words = ["ab", "abc", "c", "abcab", "x", " ", "é", "\r"]
    lines = ["".join(rng.choice(words) for _ in range(rng.randrange(0, 8))) for _ in range(40)]
    text = "\n".join(lines) + ("\n" if seed % 3 else "")
    path = tmp_path / "f.txt"
    path.write_text(text)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert recount.count_lines_with(fd, needle.encode()) == _rg_count(path, needle)
    finally:
        os.close(fd)


def test_binary_file_goes_to_the_engine(tmp_path: Path) -> None:
    path = tmp_path / "b.bin"
    path.write_bytes(b"needle\n\0needle\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert recount.count_lines_with(fd, b"needle") is None
    finally:
        os.close(fd)
