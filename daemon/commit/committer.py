"""Write planned edits: re-check, journal, apply in order, roll back on failure.

Every editing tool commits through :func:`commit` (``apply_patch``,
``file_write``, ``file_patch``, ``file_multi_patch``). It runs in a worker
thread under the touched files' locks. The order is what makes each step safe:

1. re-read every target through the resolver and compare with what was
   planned (``stale_write``; ``read_only`` for a file that lost its write bit);
2. write the journal (before-images fsynced) before the first rename;
3. stage every new content in a temp file beside its target (where a full
   disk fails: nothing has been replaced yet, the temp files are removed),
   then install them with renames and links only, keeping what they replace
   under a backup name (:mod:`airlock.daemon.commit.staging`; adds are
   exclusive, so they never clobber a file that appeared meanwhile);
4. on an ``OSError`` while installing, rename back what landed in reverse
   order (which needs no free space), never clobbering a file someone
   changed after we wrote it, remove directories we created, and report what
   was and was not restored;
5. remove the journal: the commit point.

A full disk (ENOSPC, EDQUOT) is ``no_space`` (507), never ``internal``.

A crash anywhere between 2 and 5 leaves the journal, which the next start-up
replays (:mod:`airlock.daemon.commit.journal`); a single write gets a
light journal that only lets recovery sweep its temp file.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import AirlockError, Internal, NoSpace
from ..fsio import (
    NO_SPACE_ERRNOS,
    CommitFailed,
    PlannedWrite,
    verify_unchanged,
)
from ..fsio import roll_back as fsio_roll_back
from ..paths import Roots, walk_error
from .journal import Journal, missing_dirs
from .staging import Staged, discard, install, restore, stage

# A write that failed on one of these found its path changed under it (a race with
# another process), which is the caller's to retry, not an internal error.
_PATH_ERRNOS = frozenset(
    {errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG, errno.EXDEV}
)


def remove_dir(roots: Roots, made: str) -> None:
    """``rmdir`` one directory the patch created, through the resolver; silent if not empty."""
    with contextlib.suppress(OSError, AirlockError):
        resolved = roots.resolve(made, intent="write", check_generated=False)
        with roots.parent(resolved) as anchor:
            if anchor.name != ".":
                os.rmdir(anchor.name, dir_fd=anchor.dir_fd)


def roll_back(
    roots: Roots, done: Sequence[PlannedWrite], created_dirs: Sequence[str]
) -> tuple[list[str], list[str]]:
    """fsio's roll back, then the directories this patch created, deepest first."""
    restored, unrestored = fsio_roll_back(roots, done)
    for made in reversed(created_dirs):
        remove_dir(roots, made)
    return restored, unrestored


def commit(
    roots: Roots,
    writes: Sequence[PlannedWrite],
    *,
    journal_root: Path,
    allowed_roots: Sequence[Path] = (),
    recheck: Callable[[], None] | None = None,
) -> None:
    """Apply ``writes`` whole or not at all (see the module docstring)."""
    if not writes:
        return
    if recheck is not None:
        recheck()
    verify_unchanged(roots, writes)
    created = missing_dirs(writes)
    try:
        journal = Journal.begin(
            journal_root, writes, created_dirs=created, allowed_roots=allowed_roots
        )
    except OSError as exc:
        if exc.errno in NO_SPACE_ERRNOS:
            raise NoSpace(
                f"the daemon's state dir is full: the crash journal under {journal_root} could "
                "not be written; nothing was written. Free disk space, then retry.",
                {"journal": str(journal_root)},
            ) from exc
        raise Internal(
            f"could not write the crash journal under {journal_root} ({exc}); nothing was "
            "written. Free disk space or fix the daemon's --state-dir, then retry.",
            {"journal": str(journal_root)},
        ) from exc
    try:
        with contextlib.ExitStack() as anchors:
            _stage_and_install(roots, writes, created, anchors)
    except (AirlockError, CommitFailed):
        journal.close()  # handled: whole or absent (or said what could not be restored)
        raise
    journal.close()  # the commit point; anything unexpected leaves the journal to recovery


def _stage_and_install(
    roots: Roots,
    writes: Sequence[PlannedWrite],
    created: Sequence[str],
    anchors: contextlib.ExitStack,
) -> None:
    """Phase one writes every temp file, phase two renames them in (see ``staging``)."""
    staged: list[Staged] = []
    for write in writes:
        try:
            anchor = anchors.enter_context(
                roots.parent(write.target, create_dirs=write.create_dirs)
            )
            staged.append(stage(anchor, write, roots.new_owner))
        except (OSError, AirlockError) as exc:
            # Nothing has been replaced: remove what was staged, and say why in the
            # resolver's own words (a path that changed under us is path_escape /
            # not_found, not an internal error).
            for item in staged:
                discard(item)
            _remove_dirs(roots, created)
            if isinstance(exc, AirlockError):
                raise
            if exc.errno in _PATH_ERRNOS:
                raise walk_error(exc, write.display) from exc
            raise CommitFailed(write, exc, [], []) from exc
    done: list[Staged] = []
    for item in staged:
        try:
            install(item)
        except (OSError, AirlockError) as exc:
            restored, unrestored = _restore(done)
            for left in staged:
                discard(left)
            _remove_dirs(roots, created)
            raise CommitFailed(item.write, exc, restored, unrestored) from exc
        done.append(item)
    for item in staged:
        discard(item)  # the backups of what was replaced: the edit is whole


def _restore(done: Sequence[Staged]) -> tuple[list[str], list[str]]:
    """Rename back what was installed, in reverse order; (restored, not restorable)."""
    restored: list[str] = []
    unrestored: list[str] = []
    for item in reversed(done):
        try:
            ok = restore(item)
        except OSError:
            ok = False
        (restored if ok else unrestored).append(item.write.display)
    return restored, unrestored


def _remove_dirs(roots: Roots, created: Sequence[str]) -> None:
    for made in reversed(created):
        remove_dir(roots, made)


def failure_error(exc: CommitFailed) -> AirlockError:
    """The model-facing error for a write that failed after others landed."""
    return exc.as_error()
