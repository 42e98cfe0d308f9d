"""The crash journal: what a patch is about to do, written before the first rename.

One directory per apply under ``<state>/apply_patch/<workspace key>/<id>/``:

* ``before-<n>``: the exact bytes of each file that existed before (fsynced);
* ``journal.json``: the manifest, written last with the atomic writer, so its
  presence means "this patch may be half applied". It lists every target,
  the sha256 of what was there before and of what the patch writes, the mode,
  and the directories the patch creates.

* ``lock``: ``flock``-ed by the writer for the journal's lifetime, so a
  recovering daemon can tell a crashed writer's journal from a live one's.

Removing ``journal.json`` is the commit point. On start-up, :func:`recover`
rolls every journalled patch back: a target holding the patch's bytes gets its
``before`` back (or is removed if it was new), a target holding anything else
was changed by someone else and is left alone; created directories are removed
when empty, and temp files of the atomic writer in every touched directory are
swept. Rolling back (not forward) keeps the rule simple: no client ever saw a
success for a journalled patch, because the reply is sent after the commit
point.

A patch with a single write needs no before-image (one rename is atomic); it
gets a "light" manifest, not fsynced, that only lets recovery sweep temp files.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import AirlockError, NotFound
from ..fsio import (
    NOT_REGULAR,
    PlannedWrite,
    current_at,
    is_temp_file,
    read_all,
    remove_at,
    sha256_hex,
    temp_name_for,
    write_at,
)
from ..paths import ResolvedPath, Roots
from ..rights import as_daemon, as_daemon_call

log = logging.getLogger(__name__)

MANIFEST = "journal.json"
LOCK = "lock"
VERSION = 1


def journal_root(state_dir: Path, workspace: Path) -> Path:
    """Per-workspace directory, so daemons sharing a state dir never replay each other's."""
    key = hashlib.sha256(str(workspace).encode()).hexdigest()[:16]
    return state_dir / "apply_patch" / key


def _fsync_path(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _publish(directory: Path, name: str, data: bytes, *, sync: bool) -> None:
    tmp = directory / temp_name_for(name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, directory / name)


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _digest(data: bytes | None) -> str | None:
    return None if data is None else sha256_hex(data)


def missing_dirs(writes: Sequence[PlannedWrite]) -> list[str]:
    """Directories the writes will create, parents first."""
    created: list[str] = []
    seen: set[Path] = set()
    for write in writes:
        if write.before is not None or not write.create_dirs:
            continue
        chain: list[Path] = []
        parent = write.target.real.parent
        while not os.path.lexists(parent) and parent not in seen:
            chain.append(parent)
            parent = parent.parent
        for directory in reversed(chain):
            seen.add(directory)
            created.append(str(directory))
    return created


@dataclass
class Journal:
    """One apply's journal directory; ``close`` is the commit point.

    The writer holds an exclusive ``flock`` on the directory's ``lock`` file
    until it closes the journal; the kernel drops it when the process dies. A
    recovering daemon skips journals whose lock is still held, so a second
    daemon on the same workspace never rolls back a live patch.
    """

    directory: Path
    full: bool
    lock_fd: int

    @classmethod
    @as_daemon_call  # the state dir is the daemon's own (daemon/rights.py)
    def begin(
        cls,
        root: Path,
        writes: Sequence[PlannedWrite],
        *,
        created_dirs: Sequence[str],
        allowed_roots: Sequence[Path],
    ) -> Journal:
        full = len(writes) > 1
        root.mkdir(parents=True, exist_ok=True)
        directory = root / f"{time.time_ns():x}-{secrets.token_hex(4)}"
        directory.mkdir(mode=0o700)
        lock_fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        entries: list[dict[str, Any]] = []
        for n, write in enumerate(writes):
            blob = None
            if full and write.before is not None:
                blob = f"before-{n}"
                _write_synced(directory / blob, write.before)
            entries.append(
                {
                    "target": str(write.target.real),
                    "display": write.display,
                    "before": blob,
                    # A light manifest only drives the temp sweep: no hashes needed.
                    "before_sha256": _digest(write.before) if full else None,
                    "after_sha256": _digest(write.after) if full else None,
                    "mode": write.mode,
                }
            )
        manifest = {
            "version": VERSION,
            "full": full,
            "pid": os.getpid(),
            "entries": entries,
            "created_dirs": list(created_dirs),
            "roots": [str(r) for r in allowed_roots],
        }
        data = json.dumps(manifest).encode()
        # Written whole then renamed into place, so recovery never meets a torn manifest;
        # only a full journal (before-images to restore) pays for the fsyncs.
        _publish(directory, MANIFEST, data, sync=full)
        if full:
            _fsync_path(root)
        return cls(directory, full, lock_fd)

    def close(self) -> None:
        """The commit point: the patch is done (or fully rolled back in-process)."""
        with as_daemon():
            self._close()

    def _close(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.directory / MANIFEST)
        if self.full:
            with contextlib.suppress(OSError):
                _fsync_path(self.directory)
        shutil.rmtree(self.directory, ignore_errors=True)
        os.close(self.lock_fd)


# ---------------------------------------------------------------- recovery
#
# Nothing in a journal is trusted: it lives in the state dir, and a layout that
# puts the state dir inside the workspace (or any other bug) would let the
# agent write one. So recovery re-resolves every path against the running
# daemon's roots with the same race-free resolver the tools use, ignores the
# journal's own "roots", opens only regular files (never following a link,
# never blocking on a FIFO), takes before-images only by their fixed names
# inside the journal directory, never sets a mode bit beyond 0o777, and leaves
# (and logs) a journal it cannot verify instead of half-trusting it.

_MAX_MANIFEST = 16 * 1024 * 1024
_BLOB = re.compile(r"before-[0-9]{1,9}")
_NOFOLLOW_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Unverifiable(Exception):
    """A journal that does not describe a patch this daemon could have written."""


@dataclass(frozen=True)
class _Entry:
    target: ResolvedPath
    blob: str | None
    before_sha: str | None
    after_sha: str | None
    mode: int | None


def _read_regular_at(dir_fd: int, name: str, limit: int) -> bytes | None:
    """A regular file in ``dir_fd`` (no link followed, no FIFO waited on), else None."""
    try:
        fd = os.open(name, _NOFOLLOW_READ, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Unverifiable(f"{name} cannot be opened safely ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unverifiable(f"{name} is not a regular file")
        if st.st_size > limit:
            raise Unverifiable(f"{name} is {st.st_size} bytes, over {limit}")
        return read_all(fd, st.st_size)
    finally:
        os.close(fd)


def _sha(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value):
        return value
    raise Unverifiable(f"bad sha256 {value!r}")


def _parse(manifest: Any, roots: Roots) -> tuple[bool, list[_Entry], list[ResolvedPath]]:
    """Check the manifest's shape and resolve every path against the running roots."""
    if not isinstance(manifest, dict) or manifest.get("version") != VERSION:
        raise Unverifiable("unknown manifest format")
    full = manifest.get("full")
    entries = manifest.get("entries")
    created = manifest.get("created_dirs", [])
    if not isinstance(full, bool) or not isinstance(entries, list) or not isinstance(created, list):
        raise Unverifiable("malformed manifest")
    parsed: list[_Entry] = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("target"), str):
            raise Unverifiable("malformed entry")
        blob = entry.get("before")
        if blob is not None and (not isinstance(blob, str) or not _BLOB.fullmatch(blob)):
            raise Unverifiable(f"before-image name {blob!r} is not one this daemon writes")
        mode = entry.get("mode")
        if mode is not None and (not isinstance(mode, int) or isinstance(mode, bool)):
            raise Unverifiable(f"bad mode {mode!r}")
        parsed.append(
            _Entry(
                target=_resolve(roots, entry["target"]),
                blob=blob,
                before_sha=_sha(entry.get("before_sha256")),
                after_sha=_sha(entry.get("after_sha256")),
                mode=None if mode is None else mode & 0o777,
            )
        )
    dirs: list[ResolvedPath] = []
    for made in created:
        if not isinstance(made, str):
            raise Unverifiable("malformed created_dirs")
        dirs.append(_resolve(roots, made))
    return full, parsed, dirs


def _resolve(roots: Roots, raw: str) -> ResolvedPath:
    if not raw.startswith("/"):
        raise Unverifiable(f"{raw!r} is not an absolute path")
    try:
        resolved = roots.resolve(raw, intent="write", check_generated=False)
    except AirlockError as exc:
        raise Unverifiable(f"{raw}: {exc.message}") from None
    if str(resolved.real) != os.path.normpath(raw):
        # The journal names the real path it wrote; anything that resolves elsewhere
        # (a symlink on the way) is not the file the patch touched.
        raise Unverifiable(f"{raw} resolves to {resolved.real} through a symbolic link")
    return resolved


def _roll_back_entry(roots: Roots, dir_fd: int, entry: _Entry) -> str:
    target = entry.target
    try:
        with roots.parent(target) as anchor:
            current, _ = current_at(anchor)
    except NotFound:
        current = None
    if current is NOT_REGULAR:
        log.warning("apply_patch recovery: %s is not a regular file; left as it is", target.real)
        return "changed"
    current_sha = None if current is None else sha256_hex(current)
    if current_sha == entry.before_sha:
        return "unchanged"
    if current_sha != entry.after_sha:
        log.warning(
            "apply_patch recovery: %s changed since the interrupted patch; left as it is",
            target.real,
        )
        return "changed"
    if entry.before_sha is None:
        with roots.parent(target) as anchor, contextlib.suppress(FileNotFoundError):
            remove_at(anchor)
        return "removed"
    if entry.blob is None:
        return "unrecoverable"
    before = _read_regular_at(dir_fd, entry.blob, 1 << 40)
    if before is None or sha256_hex(before) != entry.before_sha:
        log.error("apply_patch recovery: before-image of %s is corrupt; left as it is", target.real)
        return "corrupt"
    with roots.parent(target, create_dirs=True) as anchor:
        write_at(anchor, before, mode=entry.mode, owner=roots.new_owner, exclusive=current is None)
    return "restored"


def sweep_temps(roots: Roots, directories: Sequence[ResolvedPath]) -> list[str]:
    """Remove the atomic writer's leftovers (regular files only) in ``directories``.

    Each directory is opened through the resolver, so only directories inside
    the running daemon's roots are ever swept.
    """
    removed: list[str] = []
    seen: set[str] = set()
    for directory in directories:
        if str(directory.real) in seen:
            continue
        seen.add(str(directory.real))
        try:
            with roots.directory(directory) as dir_fd:
                for name in os.listdir(dir_fd):
                    if not is_temp_file(name):
                        continue
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode):
                        os.unlink(name, dir_fd=dir_fd)
                        removed.append(f"{directory.display}/{name}")
        except (OSError, AirlockError):
            continue
    return removed


def _parent_of(roots: Roots, resolved: ResolvedPath) -> ResolvedPath | None:
    parent = resolved.real.parent
    try:
        return roots.resolve(str(parent), intent="read", check_generated=False)
    except AirlockError:
        return None


def _held_by_live_writer(dir_fd: int) -> tuple[bool, int | None]:
    """Take the journal's lock; ``True`` if a live process still holds it."""
    try:
        fd = os.open(LOCK, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return False, None
    except OSError:
        raise Unverifiable("its lock file cannot be opened safely") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Unverifiable("its lock file is not a regular file")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return True, None
    return False, fd


def replay(directory: Path, roots: Roots) -> dict[str, str]:
    """Roll one journalled patch back; returns target -> outcome.

    Raises :class:`Unverifiable` (the journal is left in place) when anything
    in it cannot be checked against the running roots.
    """
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        busy, lock_fd = _held_by_live_writer(dir_fd)
        if busy:
            log.warning("apply_patch recovery: %s belongs to a running process; skipped", directory)
            return {}
        try:
            return _replay(directory, dir_fd, roots)
        finally:
            if lock_fd is not None:
                os.close(lock_fd)
    finally:
        os.close(dir_fd)


def _replay(directory: Path, dir_fd: int, roots: Roots) -> dict[str, str]:
    raw = _read_regular_at(dir_fd, MANIFEST, _MAX_MANIFEST)
    if raw is None:
        # No manifest: a journal that never got published (or already committed).
        shutil.rmtree(directory, ignore_errors=True)
        return {}
    try:
        manifest = json.loads(raw)
    except ValueError:
        raise Unverifiable("the manifest is not JSON") from None
    full, entries, created = _parse(manifest, roots)
    outcomes: dict[str, str] = {}
    touched: list[ResolvedPath] = []
    for entry in reversed(entries):
        parent = _parent_of(roots, entry.target)
        if parent is not None:
            touched.append(parent)
        if full:
            try:
                outcomes[str(entry.target.real)] = _roll_back_entry(roots, dir_fd, entry)
            except (OSError, AirlockError) as exc:
                log.error("apply_patch recovery: could not restore %s: %s", entry.target.real, exc)
                outcomes[str(entry.target.real)] = "failed"
    sweep_temps(roots, touched + created)
    # A directory the patch created is empty again unless its file landed whole.
    for made in reversed(created):
        with contextlib.suppress(OSError, AirlockError), roots.parent(made) as anchor:
            if anchor.name != ".":
                os.rmdir(anchor.name, dir_fd=anchor.dir_fd)
    os.unlink(MANIFEST, dir_fd=dir_fd)
    shutil.rmtree(directory, ignore_errors=True)
    return outcomes


def recover_all(root: Path, roots: Roots) -> list[dict[str, str]]:
    """Replay every unfinished journal under ``root`` (oldest first).

    Only real directories are looked at (a symlink planted there is skipped);
    a journal that cannot be verified is left in place and logged, and never
    keeps the daemon from starting.

    It runs with the daemon's own rights (daemon/rights.py), before serving: the
    journals live in the daemon's state dir, and every path they name is
    re-resolved through the race-free resolver inside the running roots.
    """
    with as_daemon():
        return _recover_all(root, roots)


def _recover_all(root: Path, roots: Roots) -> list[dict[str, str]]:
    try:
        st = os.stat(root, follow_symlinks=False)
    except OSError:
        return []
    if not stat.S_ISDIR(st.st_mode):
        log.error("apply_patch recovery: %s is not a directory; ignored", root)
        return []
    results = []
    with os.scandir(root) as it:
        names = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
    for name in names:
        directory = root / name
        try:
            outcome = replay(directory, roots)
        except Unverifiable as exc:
            log.error(
                "apply_patch recovery: journal %s left unapplied, it cannot be verified: %s",
                directory,
                exc,
            )
            continue
        except Exception as exc:  # a damaged journal must never keep the daemon from starting
            log.error(
                "apply_patch recovery: %s could not be replayed (%r); left for inspection",
                directory,
                exc,
            )
            continue
        if outcome:
            log.warning("apply_patch recovery: rolled back %s: %s", directory.name, outcome)
        results.append(outcome)
    return results
