"""The one atomic writer, the one regular-file reader, and the locks that serialise writes.

Everything here works on fds handed out by the resolver (:mod:`airlock.daemon.paths`):
a write goes to a temp file created with ``O_EXCL | O_NOFOLLOW`` in the target's
own directory fd (so the rename cannot cross a file system or a swapped
directory), takes the old file's mode, owner and group, is fsynced, then
renamed over the target with ``renameat``, and the directory fd is fsynced so
the rename itself survives a crash (replacing a big file, the old inode is
released on a background thread afterwards, so freeing its blocks is not on the
reply's path). Temp files carry a fixed marker so a
restart can sweep any left behind. A file whose mode gives its owner no write
bit is refused with ``read_only`` and nothing is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import os
import queue
import secrets
import stat
import threading
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path

from .errors import (
    AirlockError,
    Conflict,
    Forbidden,
    Internal,
    NoSpace,
    NotFound,
    ReadOnly,
    StaleWrite,
    TooLarge,
)
from .paths import Anchor, ResolvedPath, Roots

TEMP_MARKER = ".airlock-tmp-"
# A full file system or a used-up quota: ``no_space`` (507), the caller frees space.
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
DEFAULT_FILE_MODE = 0o644
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def temp_name_for(name: str) -> str:
    return f"{TEMP_MARKER}{secrets.token_hex(6)}-{name}"[:255]


def is_temp_file(name: str) -> bool:
    return name.startswith(TEMP_MARKER)


def _umask_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return DEFAULT_FILE_MODE & ~umask


def refuse_read_only(st: os.stat_result, display: str) -> None:
    """``read_only`` for a file whose owner has no write bit (Codex refuses those too)."""
    if not st.st_mode & stat.S_IWUSR:
        raise ReadOnly(
            f"{display} is read-only (mode {stat.S_IMODE(st.st_mode):04o}: its owner has no "
            "write permission), so it is not edited; nothing was written. Make it writable "
            "with exec (chmod u+w) first if changing it is really intended.",
            {"path": display, "mode": f"{stat.S_IMODE(st.st_mode):04o}"},
        )


def read_all(fd: int, size_hint: int) -> bytes:
    """Everything from the current offset to end of file (which may have grown since fstat)."""
    chunk = os.read(fd, size_hint + 1)
    if len(chunk) == size_hint:
        return chunk
    parts = [chunk]
    while chunk:
        chunk = os.read(fd, 1 << 16)
        parts.append(chunk)
    return b"".join(parts)


def read_file_bytes(
    roots: Roots, resolved: ResolvedPath, *, max_bytes: int | None = None
) -> tuple[bytes, os.stat_result]:
    """Read a regular file through the resolver, with the errors every tool wants."""
    display = resolved.display
    with roots.open_regular(resolved) as (fd, st):
        if max_bytes is not None and st.st_size > max_bytes:
            raise TooLarge(
                f"{display} is {st.st_size} bytes, over the {max_bytes}-byte limit; "
                "read part of it with exec (e.g. head -c)",
                {"path": display, "bytes": st.st_size, "limit": max_bytes},
            )
        return read_all(fd, st.st_size), st


# Replacing a big file frees its blocks inside ``rename`` (about 1 ms per MB on ext4),
# on the path of the reply. Holding a descriptor of the old file moves that work to its
# ``close``, which a background thread does after the reply (see docs/performance.md).
RELEASE_LATER_BYTES = 256 * 1024
_RELEASE_IDLE_S = 5.0


class _Releaser:
    """Closes descriptors of replaced files on a background thread.

    Closing the last descriptor of an unlinked inode is what frees its blocks;
    nothing waits for it, and a crash meanwhile leaves an orphan inode that the
    file system reclaims at mount, as for any file unlinked while open. The
    thread exits after a few idle seconds and is started again on demand.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def close_later(self, fd: int) -> None:
        self._queue.put(fd)
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="airlockd-release", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                fd = self._queue.get(timeout=_RELEASE_IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._thread = None
                        return
                continue
            with contextlib.suppress(OSError):
                os.close(fd)


_RELEASER = _Releaser()


def release_later(fd: int) -> None:
    """Close ``fd`` (of an unlinked or replaced file) on the background releaser."""
    _RELEASER.close_later(fd)


def _hold_replaced(dir_fd: int, name: str, current: os.stat_result | None) -> int | None:
    """A descriptor of the big regular file about to be replaced, or None."""
    if current is None or not stat.S_ISREG(current.st_mode):
        return None
    if current.st_size < RELEASE_LATER_BYTES:
        return None
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError:
        return None
    return fd


def write_at(
    anchor: Anchor,
    data: bytes,
    *,
    mode: int | None,
    owner: tuple[int, int] | None,
    exclusive: bool,
) -> None:
    """Replace (or, ``exclusive``, create) ``anchor.name`` with ``data`` atomically.

    An existing regular file's mode (permission bits only), owner and group are
    kept; a new file gets ``mode`` (else 0644 less the umask) and ``owner``
    (the exec user's, when the daemon runs as root). ``exclusive`` links the
    temp file into place, which fails if anything appeared at the name
    meanwhile, so an add never clobbers a concurrent file.
    """
    tmp, fd = open_temp(anchor.dir_fd, anchor.name)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        discard_temp(anchor.dir_fd, tmp, fd)
        raise
    publish_temp(anchor, tmp, fd, mode=mode, owner=owner, exclusive=exclusive)


def open_temp(dir_fd: int, name: str) -> tuple[str, int]:
    """A new temp file (0600, ``O_EXCL | O_NOFOLLOW``) beside ``name``: (its name, its fd).

    Streamed writers (``PUT /v1/files``) fill it themselves, then hand it to
    :func:`publish_temp`; :func:`write_at` does both for bytes in memory.
    """
    tmp = temp_name_for(name)
    return tmp, os.open(tmp, _WRITE_FLAGS, 0o600, dir_fd=dir_fd)


def discard_temp(dir_fd: int, tmp: str, fd: int) -> None:
    """Close and remove a temp file that will not be published."""
    with contextlib.suppress(OSError):
        os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=dir_fd)


def publish_temp(
    anchor: Anchor,
    tmp: str,
    fd: int,
    *,
    mode: int | None,
    owner: tuple[int, int] | None,
    exclusive: bool,
) -> None:
    """Give the filled temp file its mode and owner, fsync it, and move it into place.

    The rules of :func:`write_at`: an existing regular file's mode and owner are
    kept (and a read-only one refused); ``fd`` is closed and the temp file gone
    whatever happens.
    """
    dir_fd, name = anchor.dir_fd, anchor.name
    try:
        current = None if exclusive else anchor.lstat()
        if current is not None and stat.S_ISREG(current.st_mode):
            refuse_read_only(current, anchor.display)
            mode = stat.S_IMODE(current.st_mode) & 0o777
            owner = (current.st_uid, current.st_gid)
        if mode is None:
            mode = _umask_mode()
        held = _hold_replaced(dir_fd, name, current)
    except BaseException:
        discard_temp(dir_fd, tmp, fd)
        raise
    try:
        _replace(dir_fd, name, tmp, fd, mode, owner, exclusive)
    finally:
        if held is not None:
            _RELEASER.close_later(held)


def seal_temp(fd: int, mode: int, owner: tuple[int, int] | None) -> None:
    """A temp file's last steps before it is renamed into place: owner, mode, fsync.

    Shared by the atomic writer here and the commit step's staging, so both leave
    a file owned, moded and on disk the same way.
    """
    if owner is not None and (owner[0] != os.geteuid() or owner[1] != os.getegid()):
        # Only root may give a file away; an unprivileged daemon keeps its own.
        with contextlib.suppress(PermissionError):
            os.fchown(fd, *owner)
    os.fchmod(fd, mode & 0o777)
    os.fsync(fd)


def _replace(
    dir_fd: int,
    name: str,
    tmp: str,
    fd: int,
    mode: int,
    owner: tuple[int, int] | None,
    exclusive: bool,
) -> None:
    """Owner, mode, fsync, rename (or link for ``exclusive``) into place, fsync the directory."""
    try:
        try:
            seal_temp(fd, mode, owner)
        finally:
            os.close(fd)
        if exclusive:
            os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            os.unlink(tmp, dir_fd=dir_fd)
        else:
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)


def remove_at(anchor: Anchor) -> None:
    """Unlink ``anchor.name`` (a file, never a directory) and make it durable."""
    os.unlink(anchor.name, dir_fd=anchor.dir_fd)
    os.fsync(anchor.dir_fd)


def current_at(anchor: Anchor) -> tuple[bytes | None, os.stat_result | None]:
    """What is at ``anchor`` now: (bytes, stat) for a regular file, (None, None) when absent,
    (a marker, stat) for anything else; special files are never opened."""
    st = anchor.lstat()
    if st is None:
        return None, None
    if not stat.S_ISREG(st.st_mode):
        return NOT_REGULAR, st
    try:
        fd = os.open(
            anchor.name,
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            dir_fd=anchor.dir_fd,
        )
    except FileNotFoundError:
        return None, None
    except OSError:
        return NOT_REGULAR, st
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return NOT_REGULAR, st
        return read_all(fd, st.st_size), st
    finally:
        os.close(fd)


NOT_REGULAR = b"\x00<not a regular file>"


class PathLocks:
    """Async locks keyed by real path, created on demand and dropped when idle.

    Writes to one file are serialised; ``hold`` takes several in a fixed
    (sorted) order so two multi-file edits can never deadlock.
    """

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    @contextlib.asynccontextmanager
    async def hold(self, keys: Iterable[str | Path]) -> AsyncIterator[None]:
        ordered = sorted({str(k) for k in keys})
        for key in ordered:
            self._users[key] = self._users.get(key, 0) + 1
            self._locks.setdefault(key, asyncio.Lock())
        acquired: list[str] = []
        try:
            for key in ordered:
                await self._locks[key].acquire()
                acquired.append(key)
            yield
        finally:
            for key in reversed(acquired):
                self._locks[key].release()
            for key in ordered:
                self._users[key] -= 1
                if self._users[key] == 0:
                    del self._users[key]
                    del self._locks[key]


class PlannedWrite:
    """One file's planned change: ``after=None`` deletes it, ``before=None`` creates it.

    ``target`` is a resolved path; the write itself goes through the resolver's
    fds (``Roots.parent``), never through ``target.real``.
    """

    __slots__ = ("after", "before", "create_dirs", "display", "mode", "target")

    def __init__(
        self,
        target: ResolvedPath,
        *,
        before: bytes | None,
        after: bytes | None,
        display: str,
        mode: int | None = None,
        create_dirs: bool = True,
    ) -> None:
        self.target = target
        self.before = before
        self.after = after
        self.display = display
        self.mode = mode
        self.create_dirs = create_dirs


class CommitFailed(Exception):
    """A write failed after others had landed; says what was rolled back."""

    def __init__(
        self, failed: PlannedWrite, cause: BaseException, restored: list[str], unrestored: list[str]
    ) -> None:
        super().__init__(str(cause))
        self.failed = failed
        self.cause = cause
        self.restored = restored
        self.unrestored = unrestored

    def as_error(self) -> AirlockError:
        """The model-facing error: what failed, what was rolled back, what could not be.

        A write refused by the confinement layer (a directory swapped for a
        symlink or a file after planning) means the workspace changed under the
        call: ``conflict``, retry. A full disk or quota is ``no_space``. A
        permission the exec user lacks (the tools act with its rights) is
        ``forbidden``. Anything else (EFBIG, EIO) is the machine's failure: ``internal``.
        """
        raced = isinstance(self.cause, AirlockError)
        errno_ = self.cause.errno if isinstance(self.cause, OSError) else None
        full = errno_ in NO_SPACE_ERRNOS
        denied = isinstance(self.cause, PermissionError)
        error = Conflict if raced else NoSpace if full else Forbidden if denied else Internal
        cause = f"the file system is full: {os.strerror(errno_ or 0)}" if full else str(self.cause)
        return error(
            f"writing {self.failed.display} failed ({cause}); "
            + (
                f"rolled back: {', '.join(self.restored)}. "
                if self.restored
                else ("nothing was rolled back. " if self.unrestored else "nothing was written. ")
            )
            + (
                "could NOT roll back (changed by someone else meanwhile): "
                f"{', '.join(self.unrestored)}. "
                if self.unrestored
                else ""
            )
            + (
                "Something changed these paths while the call ran; re-read them and try again."
                if raced
                else "Free disk space (remove build outputs or caches with exec), then retry."
                if full
                else "The sandbox's user may not write there; fix the permissions with exec "
                "(ls -l, chmod) or write elsewhere."
                if denied
                else "Fix the cause (permissions, disk space) and try again."
            ),
            {
                "failed": self.failed.display,
                "rolled_back": self.restored,
                "not_rolled_back": self.unrestored,
            },
        )


def verify_unchanged(roots: Roots, plans: Sequence[PlannedWrite]) -> None:
    """Every target still holds what was planned against (or is still absent), and none
    is read-only.

    Called under the file locks right before the first write, so an edit
    planned against content that changed meanwhile writes nothing.
    """
    stale: list[str] = []
    for plan in plans:
        try:
            with roots.parent(plan.target) as anchor:
                current, st = current_at(anchor)
        except NotFound:
            current, st = None, None
        if plan.before is None:
            if current is not None:
                stale.append(f"{plan.display} (it now exists)")
        elif current != plan.before:
            stale.append(plan.display)
        elif st is not None:
            refuse_read_only(st, plan.display)
    if stale:
        raise StaleWrite(
            f"{', '.join(stale)} changed while the edit was being prepared; re-read "
            + ("it" if len(stale) == 1 else "them")
            + " and try again. Nothing was written.",
            {"paths": stale, "path": stale[0].removesuffix(" (it now exists)")},
        )


def apply_one(roots: Roots, plan: PlannedWrite) -> None:
    with roots.parent(plan.target, create_dirs=plan.create_dirs) as anchor:
        if plan.after is None:
            remove_at(anchor)
        else:
            write_at(
                anchor,
                plan.after,
                mode=plan.mode,
                owner=roots.new_owner,
                exclusive=plan.before is None,
            )


def undo_one(roots: Roots, plan: PlannedWrite) -> bool:
    """Put ``plan.before`` back unless someone changed the file after we wrote it."""
    with roots.parent(plan.target, create_dirs=True) as anchor:
        current, _ = current_at(anchor)
        if current != plan.after:
            return False
        if plan.before is None:
            with contextlib.suppress(FileNotFoundError):
                remove_at(anchor)
        elif plan.after is None:
            write_at(anchor, plan.before, mode=plan.mode, owner=roots.new_owner, exclusive=True)
        else:
            write_at(anchor, plan.before, mode=plan.mode, owner=None, exclusive=False)
    return True


def roll_back(roots: Roots, done: Sequence[PlannedWrite]) -> tuple[list[str], list[str]]:
    """Undo landed writes in reverse order; returns (restored, not restorable)."""
    restored: list[str] = []
    unrestored: list[str] = []
    for landed in reversed(done):
        try:
            ok = undo_one(roots, landed)
        except (OSError, Exception):
            ok = False
        (restored if ok else unrestored).append(landed.display)
    return restored, unrestored
