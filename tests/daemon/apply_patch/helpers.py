"""Shared helpers for the apply_patch tests: tree snapshots and patch builders."""

from __future__ import annotations

import os
from pathlib import Path

from airlock.daemon.fsio import is_temp_file

REPO = Path(__file__).resolve().parents[3]
# Codex's scenarios, vendored (Apache-2.0; provenance and licence in conformance/SOURCE.md).
CONFORMANCE = Path(__file__).resolve().parent / "conformance"


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Relative path -> bytes (files) or None (directories), symlinks followed, like upstream."""
    out: dict[str, bytes | None] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        base = Path(dirpath)
        for name in dirnames:
            out[(base / name).relative_to(root).as_posix()] = None
        for name in filenames:
            path = base / name
            out[path.relative_to(root).as_posix()] = path.read_bytes()
    return out


def temp_files(root: Path) -> list[str]:
    found: list[str] = []
    for dirpath, _dirs, files in os.walk(root):
        found.extend(os.path.join(dirpath, f) for f in files if is_temp_file(f))
    return found


def patch(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"]) + "\n"
