"""``diagnostics`` on a directory: every file under it, within reason.

A model asking for diagnostics of ``src`` (or ``.``) means the files in it.
Hidden folders, virtual environments and generated trees (``node_modules``,
``dist``...) are skipped, and at most :data:`MAX_FILES` files are taken, in
sorted order so the same tree always gives the same answer.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from airlock.daemon.paths import DEFAULT_GENERATED_DIRS, ResolvedPath

MAX_FILES = 200
_SKIPPED_DIRS = frozenset({*DEFAULT_GENERATED_DIRS, "__pycache__", "target", "build"})


@dataclass
class Expansion:
    paths: list[ResolvedPath] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)  # displays of directories cut short
    unreadable_names: list[str] = field(default_factory=list)  # skip reasons, one per folder


def _utf8(name: str) -> bool:
    """A name the wire can carry: file names are bytes, JSON strings are UTF-8."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _child(parent: ResolvedPath, real: Path) -> ResolvedPath:
    rel = real.relative_to(parent.real).as_posix()
    display = rel if parent.display in ("", ".") else str(PurePosixPath(parent.display) / rel)
    return ResolvedPath(real=real, root=parent.root, display=display)


def _walk(folder: Path, limit: int, bad_names: list[str]) -> tuple[list[Path], bool]:
    found: list[Path] = []
    for current, dirs, names in os.walk(folder):
        bad_names.extend(os.path.join(current, n) for n in (*dirs, *names) if not _utf8(n))
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and _utf8(d)
            and d not in _SKIPPED_DIRS
            and not (Path(current, d, "pyvenv.cfg")).exists()
        )
        for name in sorted(n for n in names if _utf8(n)):
            candidate = Path(current, name)
            if candidate.is_file() and not candidate.is_symlink():
                found.append(candidate)
                if len(found) > limit:
                    return found[:limit], True
    return found, False


def expand(paths: Sequence[ResolvedPath]) -> Expansion:
    """Directories replaced by their files (blocking: run in a thread)."""
    out = Expansion()
    seen: set[Path] = set()
    for path in paths:
        if not path.real.is_dir():
            if path.real not in seen:
                seen.add(path.real)
                out.paths.append(path)
            continue
        budget = MAX_FILES - len(out.paths)
        bad: list[str] = []
        files, cut = _walk(path.real, max(0, budget), bad)
        if cut or budget <= 0:
            out.truncated.append(path.display)
        if bad:
            out.unreadable_names.append(
                f"{len(bad)} entries under {path.display} have names that are not UTF-8 and "
                "were not checked; rename them (exec: mv) to check them"
            )
        for real in files:
            if real not in seen:
                seen.add(real)
                out.paths.append(_child(path, real))
    return out
