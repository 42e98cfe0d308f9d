"""Directory trees for tests: a fresh workspace with given files, or a copy of the checkout."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path


def copy_files(files: Iterable[Path], root: Path, dest: Path) -> Path:
    """Copy each of ``files`` (paths under ``root``) to the same place under ``dest``.

    Symbolic links stay links (a clone has them as links); files that are gone
    from the working tree (deleted, not yet committed) are passed over.
    """
    for src in files:
        if not (src.exists() or src.is_symlink()):
            continue
        target = dest / src.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            target.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, target)
    return dest


def write_files(root: Path, files: Mapping[str, str | bytes]) -> None:
    """Write ``files`` (relative path -> text or bytes) under ``root``, making directories."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def write_tree(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """Create ``root`` holding ``files``; returns ``root`` (a fresh workspace, say)."""
    root.mkdir(parents=True)
    write_files(root, files)
    return root
