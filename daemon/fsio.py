"""The one atomic writer, and the locks that serialise writes.

A write goes to a temp file in the target's own directory (so the rename
cannot cross a filesystem), takes the old file's mode, is fsynced, then renamed
over the target, and the directory is fsynced so the rename itself survives a
crash. Temp files carry a fixed marker so a restart can sweep any left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
import stat
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path

from airlock.daemon.errors import Internal, IsDirectory, NotFound, StaleWrite, TooLarge

TEMP_MARKER = ".airlock-tmp-"
DEFAULT_FILE_MODE = 0o644


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def temp_path_for(target: Path) -> Path:
    return target.with_name(f"{TEMP_MARKER}{secrets.token_hex(6)}-{target.name}"[:255])


def is_temp_file(name: str) -> bool:
    return name.startswith(TEMP_MARKER)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def current_mode(target: Path) -> int | None:
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        return None


def atomic_write(
    target: Path,
    data: bytes,
    *,
    mode: int | None = None,
    create_dirs: bool = False,
    exclusive: bool = False,
) -> None:
    """Replace ``target`` with ``data`` atomically.

    ``mode`` defaults to the existing file's mode (new files get 0644 less the
    umask). ``exclusive`` refuses to replace an existing file: the final step is
    then a hard link, which fails if something appeared at ``target`` meanwhile,
    so an Add can never clobber a file created concurrently.
    """
    parent = target.parent
    if create_dirs:
        parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        mode = current_mode(target)
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = DEFAULT_FILE_MODE & ~umask
    tmp = temp_path_for(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            os.link(tmp, target)
            os.unlink(tmp)
        else:
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(parent)


def read_file_bytes(path: Path, *, display: str, max_bytes: int | None = None) -> bytes:
    """Read a regular file, with the errors every tool wants."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise NotFound(
            f"{display} does not exist; check the path with file_list or file_search",
            {"path": display},
        ) from None
    if stat.S_ISDIR(st.st_mode):
        raise IsDirectory(f"{display} is a directory; list it with file_list", {"path": display})
    if max_bytes is not None and st.st_size > max_bytes:
        raise TooLarge(
            f"{display} is {st.st_size} bytes, over the {max_bytes}-byte limit; "
            "read part of it with exec (e.g. head -c)",
            {"path": display, "bytes": st.st_size, "limit": max_bytes},
        )
    with open(path, "rb") as handle:
        return handle.read()


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
    """One file's planned change: ``after=None`` deletes it, ``before=None`` creates it."""

    __slots__ = ("after", "before", "create_dirs", "display", "mode", "target")

    def __init__(
        self,
        target: Path,
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

    def as_error(self) -> Internal:
        """The model-facing error: what failed, what was rolled back, what could not be."""
        return Internal(
            f"writing {self.failed.display} failed ({self.cause}); "
            + (
                f"rolled back: {', '.join(self.restored)}. "
                if self.restored
                else "nothing had been written yet. "
            )
            + (
                "could NOT roll back (changed by someone else meanwhile): "
                f"{', '.join(self.unrestored)}. "
                if self.unrestored
                else ""
            )
            + "Fix the cause (permissions, disk space) and try again.",
            {
                "failed": self.failed.display,
                "rolled_back": self.restored,
                "not_rolled_back": self.unrestored,
            },
        )


def _current_bytes(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except (IsADirectoryError, NotADirectoryError):
        return b"\x00<not a regular file>"


def verify_unchanged(plans: Sequence[PlannedWrite]) -> None:
    """Every target still holds what was planned against (or is still absent).

    Called under the file locks right before the first write, so an edit
    planned against content that changed meanwhile writes nothing.
    """
    stale: list[str] = []
    for plan in plans:
        current = _current_bytes(plan.target)
        if plan.before is None:
            if current is not None or os.path.lexists(plan.target):
                stale.append(f"{plan.display} (it now exists)")
        elif current != plan.before:
            stale.append(plan.display)
    if stale:
        raise StaleWrite(
            f"{', '.join(stale)} changed while the edit was being prepared; re-read "
            + ("it" if len(stale) == 1 else "them")
            + " and try again. Nothing was written.",
            {"paths": stale, "path": stale[0].removesuffix(" (it now exists)")},
        )


def apply_one(plan: PlannedWrite) -> None:
    if plan.after is None:
        os.unlink(plan.target)
        fsync_dir(plan.target.parent)
    else:
        atomic_write(
            plan.target,
            plan.after,
            mode=plan.mode,
            create_dirs=plan.create_dirs,
            exclusive=plan.before is None,
        )


def undo_one(plan: PlannedWrite) -> bool:
    """Put ``plan.before`` back unless someone changed the file after we wrote it."""
    if _current_bytes(plan.target) != plan.after:
        return False
    if plan.before is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(plan.target)
    else:
        atomic_write(plan.target, plan.before, mode=plan.mode, create_dirs=True)
    return True


def roll_back(done: Sequence[PlannedWrite]) -> tuple[list[str], list[str]]:
    """Undo landed writes in reverse order; returns (restored, not restorable)."""
    restored: list[str] = []
    unrestored: list[str] = []
    for landed in reversed(done):
        try:
            ok = undo_one(landed)
        except OSError:
            ok = False
        (restored if ok else unrestored).append(landed.display)
    return restored, unrestored


def commit_writes(plans: list[PlannedWrite]) -> None:
    """Check nothing changed since planning, apply every plan in order, and on
    failure undo what landed, in reverse order.

    Raises ``StaleWrite`` (nothing written) or :class:`CommitFailed` naming the
    restored and unrestorable files.
    """
    verify_unchanged(plans)
    done: list[PlannedWrite] = []
    for plan in plans:
        try:
            apply_one(plan)
        except OSError as exc:
            restored, unrestored = roll_back(done)
            raise CommitFailed(plan, exc, restored, unrestored) from exc
        done.append(plan)
