"""A sorted, bounded directory walk that never follows a symlink.

Order is depth-first with each directory's entries sorted by name, which is
exactly the order of ``rg --sort path`` and of sorting paths component by
component; so the listing, the grep fallback and rg agree on "sorted by path".
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .ignore import DIR_FLAGS, IgnoreStack, opened

Kind = Literal["file", "dir", "symlink", "other"]


def path_key(path: str) -> tuple[str, ...]:
    """Sort key for "sorted by path": component-wise, so ``a/b`` sorts before ``a.txt``
    exactly as ``rg --sort path`` and a tree walk order them."""
    return tuple(path.split("/"))


@dataclass(frozen=True)
class WalkEntry:
    rel: str
    kind: Kind
    size: int | None
    depth: int


@dataclass
class WalkStats:
    """What the walk left out, for notes, and how much it listed."""

    ignored: int = 0
    ignored_examples: list[str] | None = None
    too_deep: bool = False
    deep_dirs: int = 0
    """Folders at the depth bound, not entered (``too_deep`` says whether there was one)."""
    not_utf8: list[str] = field(default_factory=list)
    """Entries whose names are not UTF-8, left out (only with ``SkipRules.not_utf8``)."""
    listed: int = 0
    """Every entry of every folder listed, skipped ones included (an entry bound for callers)."""

    def record_ignored(self, rel: str, is_dir: bool) -> None:
        self.ignored += 1
        if self.ignored_examples is None:
            self.ignored_examples = []
        if len(self.ignored_examples) < 5:
            self.ignored_examples.append(rel + ("/" if is_dir else ""))


@dataclass(frozen=True)
class SkipRules:
    """Which folders a walk neither yields nor enters, and which names it leaves out.

    Each caller keeps its own set: ``diagnostics`` skips generated trees and
    virtual environments, the type checker's scan skips vendored folders, the
    listing skips nothing beyond ``.git``.
    """

    dirs: frozenset[str] = frozenset()
    """Folder names never yielded or entered."""
    hidden_dirs: bool = False
    """Skip folders whose name starts with a dot (hidden files are still yielded)."""
    venvs: bool = False
    """Skip folders holding a ``pyvenv.cfg`` (checked relative to the parent's fd)."""
    not_utf8: bool = False
    """Leave out entries whose names are not UTF-8 (the wire cannot carry them), noting them
    in ``WalkStats.not_utf8``."""

    def skips_dir(self, dir_fd: int, name: str) -> bool:
        if self.hidden_dirs and name.startswith("."):
            return True
        if name in self.dirs:
            return True
        return self.venvs and _is_venv(dir_fd, name)


NO_SKIP = SkipRules()


def _is_venv(dir_fd: int, name: str) -> bool:
    try:
        os.stat(f"{name}/pyvenv.cfg", dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _utf8(name: str) -> bool:
    """A name the wire can carry: file names are bytes, JSON strings are UTF-8."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _kind(mode: int) -> Kind:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


MAX_WALK_DEPTH = 256


def walk(
    root: Path,
    start: str,
    *,
    max_depth: int | None,
    include_hidden: bool,
    ignore: IgnoreStack | None,
    keep_file: Callable[[str], bool] | None = None,
    prune_dir: Callable[[str], bool] | None = None,
    stats: WalkStats | None = None,
    root_fd: int | None = None,
    start_fd: int | None = None,
    with_other: bool = False,
    skip_git: bool = True,
    skip: SkipRules = NO_SKIP,
    files_first: bool = False,
) -> Iterator[WalkEntry]:
    """Entries under ``root/start`` (paths relative to ``root``), in sorted order.

    ``max_depth`` 1 means the children of ``start`` only. ``.git`` is never
    entered. Symlinks are yielded as symlinks and never followed, so nothing
    outside the root is ever listed or read through one. ``ignore`` is the stack
    in effect inside ``start`` (None: ignore rules off). Every directory is
    opened from its parent's fd with ``O_NOFOLLOW`` (from ``root_fd`` when the
    caller holds the root open, or straight from ``start_fd`` when it holds the
    start directory open), so a directory swapped for a symlink during
    the walk is skipped, never entered; the walk stops at ``MAX_WALK_DEPTH``
    levels (``stats.too_deep``). FIFOs, sockets and devices are left out unless
    ``with_other`` (kind ``"other"``: looked at, never opened). ``skip_git=False``
    walks ``.git`` too (the file transfer copies whole trees). ``skip`` is the
    caller's skip set (:class:`SkipRules`). ``files_first`` yields a folder's
    non-folders before its folders (each group sorted by name), for callers that
    take "the first N files" and want a folder's own files before deeper ones.
    """
    base_rel = "" if start in ("", ".") else start
    if start_fd is not None:
        root, root_fd, base_rel_open = root, start_fd, ""
    else:
        base_rel_open = base_rel
    how = _How(
        max_depth,
        include_hidden,
        keep_file,
        prune_dir,
        stats,
        with_other,
        skip_git,
        skip,
        files_first,
    )
    try:
        with opened(root, root_fd, base_rel_open) as fd:
            yield from _walk_dir(fd, base_rel, 1, ignore, how)
    except OSError:
        return


@dataclass(frozen=True)
class _How:
    """The walk's settings, the same in every folder (see :func:`walk`)."""

    max_depth: int | None
    include_hidden: bool
    keep_file: Callable[[str], bool] | None
    prune_dir: Callable[[str], bool] | None
    stats: WalkStats | None
    with_other: bool
    skip_git: bool
    skip: SkipRules
    files_first: bool


def _walk_dir(
    dir_fd: int, dir_rel: str, depth: int, ignore: IgnoreStack | None, how: _How
) -> Iterator[WalkEntry]:
    stats, skip = how.stats, how.skip
    try:
        with os.scandir(dir_fd) as it:
            names = sorted((entry.name, entry) for entry in it)
    except OSError:
        return
    if stats is not None:
        stats.listed += len(names)
    if skip.not_utf8:
        bad = [name for name, _ in names if not _utf8(name)]
        if bad:
            if stats is not None:
                stats.not_utf8.extend(f"{dir_rel}/{n}" if dir_rel else n for n in bad)
            names = [(name, entry) for name, entry in names if _utf8(name)]
    if how.files_first:
        names.sort(key=lambda pair: _listed_as_dir(pair[1]))  # stable: sorted within each group
    for name, entry in names:
        if name == ".git" and how.skip_git:
            continue
        if not how.include_hidden and name.startswith("."):
            continue
        rel = f"{dir_rel}/{name}" if dir_rel else name
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        kind = _kind(st.st_mode)
        is_dir = kind == "dir"
        if ignore is not None and ignore.ignored(rel, is_dir):
            if stats is not None:
                stats.record_ignored(rel, is_dir)
            continue
        if kind == "file":
            if how.keep_file is not None and not how.keep_file(rel):
                continue
            yield WalkEntry(rel, kind, st.st_size, depth)
        elif kind == "dir":
            if skip.skips_dir(dir_fd, name):
                continue
            if how.prune_dir is not None and how.prune_dir(rel):
                continue
            yield WalkEntry(rel, kind, None, depth)
            if how.max_depth is None or depth < how.max_depth:
                if depth >= MAX_WALK_DEPTH:
                    if stats is not None:
                        stats.too_deep = True
                        stats.deep_dirs += 1
                    continue
                try:
                    child = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
                except OSError:
                    continue  # gone, or swapped for a link since it was listed
                try:
                    inner = ignore.enter(child, rel) if ignore is not None else None
                    yield from _walk_dir(child, rel, depth + 1, inner, how)
                finally:
                    os.close(child)
        elif kind == "symlink" or how.with_other:
            yield WalkEntry(rel, kind, None, depth)


def _listed_as_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False
