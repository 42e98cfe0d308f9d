"""A multi-file commit in two phases, so a full disk (or any write error) leaves it whole or absent.

Phase one, *stage*: every new content is written to a temp file beside its
target (fsynced, with the mode and owner it will have). This is where data
blocks are allocated, so this is where ENOSPC, EDQUOT and EFBIG happen; a
failure here has replaced nothing, and the staged temp files are removed.

Phase two, *install*: renames and links only. An update first links the
current file to a temp-marked backup name, then renames the staged file over
it; a delete renames the file to a backup name; an add links the staged file
into place (exclusively, so it never clobbers a file that appeared). None of
these needs a data block, and undoing any of them is a rename back, which
needs none either: restoring what was already replaced never depends on free
space (the old code wrote the old bytes out again, which fails on the very
disk that just filled up). Backups are removed once every target is in place.

Every operation goes through the directory fd the resolver opened at staging
time (held until the end), never a path string.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass

from ..fsio import (
    DEFAULT_FILE_MODE,
    RELEASE_LATER_BYTES,
    PlannedWrite,
    current_at,
    refuse_read_only,
    release_later,
    seal_temp,
    temp_name_for,
)
from ..paths import Anchor

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class Staged:
    """One planned write between the phases: its anchor, staged temp file and backup name."""

    write: PlannedWrite
    anchor: Anchor
    temp: str | None = None  # the staged new content, until it is linked or renamed in
    backup: str | None = None  # the file it replaces or deletes, kept until the commit
    installed: bool = False


def stage(anchor: Anchor, write: PlannedWrite, owner: tuple[int, int] | None) -> Staged:
    """Write ``write.after`` to a temp file beside the target (nothing for a delete)."""
    staged = Staged(write, anchor)
    if write.after is None:
        return staged
    mode = write.mode
    current = None if write.before is None else anchor.lstat()
    if current is not None and stat.S_ISREG(current.st_mode):
        # Replacing keeps the file's mode, owner and group (as the atomic writer does).
        refuse_read_only(current, anchor.display)
        mode = stat.S_IMODE(current.st_mode) & 0o777
        owner = (current.st_uid, current.st_gid)
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = DEFAULT_FILE_MODE & ~umask
    tmp = temp_name_for(anchor.name)
    _write_temp(anchor.dir_fd, tmp, write.after, mode, owner)
    staged.temp = tmp
    return staged


def install(staged: Staged) -> None:
    """Put one staged write in place with renames and links only; keep what it replaces."""
    dir_fd, name, write = staged.anchor.dir_fd, staged.anchor.name, staged.write
    if write.after is None:  # delete: the file moves aside, to be removed at the end
        backup = temp_name_for(name)
        os.rename(name, backup, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        staged.backup = backup
    elif write.before is None:  # add: never over something that appeared meanwhile
        assert staged.temp is not None
        os.link(staged.temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        _unlink(dir_fd, staged.temp)
        staged.temp = None
    else:  # update: a second name keeps the old inode, then the new one takes the name
        assert staged.temp is not None
        backup = temp_name_for(name)
        os.link(name, backup, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        staged.backup = backup
        os.rename(staged.temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        staged.temp = None
    staged.installed = True
    os.fsync(dir_fd)


def restore(staged: Staged) -> bool:
    """Undo one installed write by renaming back; False when someone changed it since."""
    dir_fd, name, write = staged.anchor.dir_fd, staged.anchor.name, staged.write
    current, _ = current_at(staged.anchor)
    if current != write.after:
        return False
    if write.before is None:
        _unlink(dir_fd, name)
    else:
        assert staged.backup is not None
        os.rename(staged.backup, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        staged.backup = None
    staged.installed = False
    os.fsync(dir_fd)
    return True


def discard(staged: Staged) -> None:
    """Remove what this write left beside its target: a staged temp, a backup."""
    dir_fd = staged.anchor.dir_fd
    for name in (staged.temp, staged.backup):
        if name is not None:
            with contextlib.suppress(OSError):
                _release(dir_fd, name)
    staged.temp = staged.backup = None


def _write_temp(
    dir_fd: int, tmp: str, data: bytes, mode: int, owner: tuple[int, int] | None
) -> None:
    """Create ``tmp`` (``O_EXCL | O_NOFOLLOW``) with ``data``, ``mode`` and ``owner``, fsynced;
    removed on any error. The same steps as the atomic writer's temp file in ``fsio``."""
    fd = os.open(tmp, _TEMP_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            seal_temp(fd, mode, owner)
        finally:
            os.close(fd)
    except BaseException:
        _unlink(dir_fd, tmp)
        raise


def _release(dir_fd: int, name: str) -> None:
    """Unlink ``name``; a big file's blocks are freed on a background thread (see fsio)."""
    held: int | None = None
    with contextlib.suppress(OSError):
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISREG(st.st_mode) and st.st_size >= RELEASE_LATER_BYTES:
            held = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    try:
        _unlink(dir_fd, name)
    finally:
        if held is not None:
            release_later(held)


def _unlink(dir_fd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)
