"""``diagnostics`` on a directory: every file under it, within reason.

A model asking for diagnostics of ``src`` (or ``.``) means the files in it.
Hidden folders, virtual environments and generated trees (``node_modules``,
``dist``...) are skipped, and at most :data:`MAX_FILES` files are taken, in
sorted order so the same tree always gives the same answer.

The walk starts from the folder's fd, opened through the resolver beneath
its root, and goes down one level at a time (each subfolder opened relative to
its parent with ``O_NOFOLLOW``), so a folder swapped for a symlink mid-walk
is never entered; it goes at most ``MAX_WALK_DEPTH`` levels down and says so
when it stops. Symlinks are never taken as files: only regular files are
checked.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import AirlockError
from ..paths import DEFAULT_GENERATED_DIRS, ResolvedPath, Roots
from ..search.ignore import DIR_FLAGS
from ..search.walk import MAX_WALK_DEPTH

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


def _walk(
    top_fd: int, limit: int, bad_names: list[str], too_deep: list[str]
) -> tuple[list[str], bool]:
    """Regular files under ``top_fd``, as paths relative to it, at most ``limit``.

    Top-down and sorted (a folder's files, then its subfolders in name order),
    with an explicit stack instead of ``os.fwalk``: fwalk recurses once per
    level, so a tree 1,500 levels deep raised ``RecursionError`` (an
    ``internal`` answer). Only the folders on the current chain are held open,
    and the walk goes at most :data:`MAX_WALK_DEPTH` levels down (the shared
    walker's bound, so no tree can exhaust the daemon's descriptors); deeper
    folders are named in ``too_deep`` and skipped.
    """
    found: list[str] = []
    first = os.dup(top_fd)
    stack: list[tuple[str, int, Iterator[str], int]] = []
    try:
        subdirs = _list_into(first, ".", found, bad_names)
        stack.append((".", first, iter(subdirs), 0))
        if len(found) > limit:
            return found[:limit], True
        while stack:
            rel, fd, pending, depth = stack[-1]
            name = next(pending, None)
            if name is None:
                stack.pop()
                os.close(fd)
                continue
            child_rel = os.path.normpath(os.path.join(rel, name))
            if depth + 1 >= MAX_WALK_DEPTH:
                too_deep.append(child_rel)
                continue
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # gone, or swapped for a link since it was listed
            try:
                subdirs = _list_into(child, child_rel, found, bad_names)
            except BaseException:
                os.close(child)
                raise
            stack.append((child_rel, child, iter(subdirs), depth + 1))
            if len(found) > limit:
                return found[:limit], True
        return found, False
    finally:
        for _rel, fd, _pending, _depth in stack:
            os.close(fd)


def _list_into(dir_fd: int, rel: str, found: list[str], bad_names: list[str]) -> list[str]:
    """Append the folder's regular files (sorted) to ``found``; its subfolders to enter, sorted."""
    try:
        with os.scandir(dir_fd) as it:
            entries = sorted((e.name, e.is_dir(follow_symlinks=False)) for e in it)
    except OSError:
        return []
    bad_names.extend(os.path.join(rel, n) for n, _ in entries if not _utf8(n))
    for name, is_dir in entries:
        if not is_dir and _utf8(name) and _is_regular(dir_fd, name):
            found.append(os.path.normpath(os.path.join(rel, name)))
    return [
        name
        for name, is_dir in entries
        if is_dir
        and not name.startswith(".")
        and _utf8(name)
        and name not in _SKIPPED_DIRS
        and not _is_venv(dir_fd, name)
    ]


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
        deep: list[str] = []
        try:
            with roots.directory(path) as top_fd:
                files, cut = _walk(top_fd, max(0, budget), bad, deep)
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
        if deep:
            out.unreadable_names.append(
                f"{len(deep)} folder(s) more than {MAX_WALK_DEPTH} levels below "
                f"{path.display} were not entered; name a deeper folder or file to check it"
            )
        for rel in files:
            real = path.real / rel
            if real not in seen:
                seen.add(real)
                out.paths.append(_child(path, real))
    return out
