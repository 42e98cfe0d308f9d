"""``diagnostics`` on a directory: every file under it, within reason.

A model asking for diagnostics of ``src`` (or ``.``) means the files in it.
Hidden folders, virtual environments and generated trees (``node_modules``,
``dist``...) are skipped, and at most :data:`MAX_FILES` files are taken, in
sorted order so the same tree always gives the same answer.

The walk starts from the folder's fd, opened through the resolver beneath
its root, and goes down with ``os.fwalk`` (each subfolder opened relative to
its parent without following links, and checked to be the folder listed), so
a folder swapped for a symlink mid-walk is never entered. Symlinks are never
taken as files: only regular files are checked.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from airlock.daemon.errors import AirlockError
from airlock.daemon.paths import DEFAULT_GENERATED_DIRS, ResolvedPath, Roots

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


def _is_venv(dir_fd: int, name: str) -> bool:
    try:
        os.stat(f"{name}/pyvenv.cfg", dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _is_regular(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _walk(top_fd: int, limit: int, bad_names: list[str]) -> tuple[list[str], bool]:
    """Regular files under ``top_fd``, as paths relative to it, sorted, at most ``limit``."""
    found: list[str] = []
    for current, dirs, names, dir_fd in os.fwalk(".", dir_fd=top_fd):
        bad_names.extend(os.path.join(current, n) for n in (*dirs, *names) if not _utf8(n))
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and _utf8(d)
            and d not in _SKIPPED_DIRS
            and not _is_venv(dir_fd, d)
        )
        for name in sorted(n for n in names if _utf8(n)):
            if _is_regular(dir_fd, name):
                found.append(os.path.normpath(os.path.join(current, name)))
                if len(found) > limit:
                    return found[:limit], True
    return found, False


def _is_folder(roots: Roots, path: ResolvedPath) -> bool:
    try:
        with roots.parent(path) as anchor:
            st = anchor.lstat()
    except (AirlockError, OSError):
        return False  # the check of the path itself reports what is wrong with it
    return st is not None and stat.S_ISDIR(st.st_mode)


def expand(roots: Roots, paths: Sequence[ResolvedPath]) -> Expansion:
    """Directories replaced by their files (blocking: run in a thread)."""
    out = Expansion()
    seen: set[Path] = set()
    for path in paths:
        if not _is_folder(roots, path):
            if path.real not in seen:
                seen.add(path.real)
                out.paths.append(path)
            continue
        budget = MAX_FILES - len(out.paths)
        bad: list[str] = []
        try:
            with roots.directory(path) as top_fd:
                files, cut = _walk(top_fd, max(0, budget), bad)
        except (AirlockError, OSError) as exc:
            reason = exc.message if isinstance(exc, AirlockError) else str(exc)
            out.unreadable_names.append(f"{path.display} could not be listed: {reason}")
            continue
        if cut or budget <= 0:
            out.truncated.append(path.display)
        if bad:
            out.unreadable_names.append(
                f"{len(bad)} entries under {path.display} have names that are not UTF-8 and "
                "were not checked; rename them (exec: mv) to check them"
            )
        for rel in files:
            real = path.real / rel
            if real not in seen:
                seen.add(real)
                out.paths.append(_child(path, real))
    return out
