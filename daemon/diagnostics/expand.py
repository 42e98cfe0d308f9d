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

import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import AirlockError
from ..paths import DEFAULT_GENERATED_DIRS, ResolvedPath, Roots
from ..search.walk import MAX_WALK_DEPTH, SkipRules, WalkStats, walk

MAX_FILES = 200
_SKIPPED_DIRS = frozenset({*DEFAULT_GENERATED_DIRS, "__pycache__", "target", "build"})


@dataclass
class Expansion:
    paths: list[ResolvedPath] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)  # displays of directories cut short
    unreadable_names: list[str] = field(default_factory=list)  # skip reasons, one per folder


def _child(parent: ResolvedPath, real: Path) -> ResolvedPath:
    rel = real.relative_to(parent.real).as_posix()
    display = rel if parent.display in ("", ".") else str(PurePosixPath(parent.display) / rel)
    return ResolvedPath(real=real, root=parent.root, display=display)


_SKIP = SkipRules(dirs=_SKIPPED_DIRS, hidden_dirs=True, venvs=True, not_utf8=True)


def _walk(top_fd: int, limit: int, stats: WalkStats) -> tuple[list[str], bool]:
    """Regular files under ``top_fd``, as paths relative to it, at most ``limit``.

    The shared walker, files first: a folder's files, then its subfolders in
    name order, so the cap keeps the shallower files. It goes at most
    :data:`MAX_WALK_DEPTH` levels down (``stats.deep_dirs`` counts the folders
    it did not enter) and notes names that are not UTF-8 (``stats.not_utf8``).
    """
    found: list[str] = []
    for entry in walk(
        Path("."),
        "",
        max_depth=None,
        include_hidden=True,
        ignore=None,
        stats=stats,
        start_fd=top_fd,
        skip=_SKIP,
        files_first=True,
    ):
        if entry.kind != "file":
            continue
        if len(found) == limit:
            return found, True
        found.append(entry.rel)
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
        stats = WalkStats()
        try:
            with roots.directory(path) as top_fd:
                files, cut = _walk(top_fd, max(0, budget), stats)
        except (AirlockError, OSError) as exc:
            reason = exc.message if isinstance(exc, AirlockError) else str(exc)
            out.unreadable_names.append(f"{path.display} could not be listed: {reason}")
            continue
        if cut or budget <= 0:
            out.truncated.append(path.display)
        if stats.not_utf8:
            out.unreadable_names.append(
                f"{len(stats.not_utf8)} entries under {path.display} have names that are not UTF-8 and "
                "were not checked; rename them (exec: mv) to check them"
            )
        if stats.deep_dirs:
            out.unreadable_names.append(
                f"{stats.deep_dirs} folder(s) more than {MAX_WALK_DEPTH} levels below "
                f"{path.display} were not entered; name a deeper folder or file to check it"
            )
        for rel in files:
            real = path.real / rel
            if real not in seen:
                seen.add(real)
                out.paths.append(_child(path, real))
    return out
