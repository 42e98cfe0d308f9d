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
import secrets
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airlock.daemon.fsio import (
    PlannedWrite,
    atomic_write,
    fsync_dir,
    is_temp_file,
    sha256_hex,
)

log = logging.getLogger(__name__)

MANIFEST = "journal.json"
LOCK = "lock"
VERSION = 1


def journal_root(state_dir: Path, workspace: Path) -> Path:
    """Per-workspace directory, so daemons sharing a state dir never replay each other's."""
    key = hashlib.sha256(str(workspace).encode()).hexdigest()[:16]
    return state_dir / "apply_patch" / key


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
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
        parent = write.target.parent
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
                    "target": str(write.target),
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
        if full:
            atomic_write(directory / MANIFEST, data, mode=0o600)
            fsync_dir(root)
        else:
            _write_plain(directory / MANIFEST, data)
        return cls(directory, full, lock_fd)

    def close(self) -> None:
        """The commit point: the patch is done (or fully rolled back in-process)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.directory / MANIFEST)
        if self.full:
            with contextlib.suppress(OSError):
                fsync_dir(self.directory)
        shutil.rmtree(self.directory, ignore_errors=True)
        os.close(self.lock_fd)


def _write_plain(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


def _current(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def _allowed(target: Path, roots: Sequence[Path]) -> bool:
    return any(target == r or target.is_relative_to(r) for r in roots)


def sweep_temps(directories: Sequence[Path]) -> list[str]:
    """Remove the atomic writer's leftovers in ``directories``; returns what was removed."""
    removed: list[str] = []
    for directory in sorted(set(directories)):
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if is_temp_file(name):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(directory / name)
                    removed.append(str(directory / name))
    return removed


def _roll_back_entry(directory: Path, entry: dict[str, Any]) -> str:
    target = Path(entry["target"])
    current = _current(target)
    current_sha = None if current is None else sha256_hex(current)
    after_sha = entry["after_sha256"]
    before_sha = entry["before_sha256"]
    if current_sha == before_sha:
        return "unchanged"
    if current_sha != after_sha:
        log.warning(
            "apply_patch recovery: %s changed since the interrupted patch; left as it is",
            target,
        )
        return "changed"
    if before_sha is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)
        fsync_dir(target.parent)
        return "removed"
    blob = entry.get("before")
    if blob is None:
        return "unrecoverable"
    with open(directory / blob, "rb") as handle:
        before = handle.read()
    if sha256_hex(before) != before_sha:
        log.error("apply_patch recovery: before-image of %s is corrupt; left as it is", target)
        return "corrupt"
    atomic_write(target, before, mode=entry.get("mode"), create_dirs=True)
    return "restored"


def _held_by_live_writer(directory: Path) -> tuple[bool, int | None]:
    """Take the journal's lock; ``True`` if a live process still holds it."""
    try:
        fd = os.open(directory / LOCK, os.O_RDWR)
    except FileNotFoundError:
        return False, None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return True, None
    return False, fd


def replay(directory: Path, extra_roots: Sequence[Path]) -> dict[str, str]:
    """Roll one journalled patch back; returns target -> outcome."""
    busy, lock_fd = _held_by_live_writer(directory)
    if busy:
        log.warning("apply_patch recovery: %s belongs to a running process; skipped", directory)
        return {}
    try:
        return _replay(directory, extra_roots)
    finally:
        if lock_fd is not None:
            os.close(lock_fd)


def _replay(directory: Path, extra_roots: Sequence[Path]) -> dict[str, str]:
    manifest_path = directory / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_bytes())
    except FileNotFoundError:
        shutil.rmtree(directory, ignore_errors=True)
        return {}
    except ValueError:
        # Only a light (unsynced) manifest can be torn; nothing to roll back then.
        log.warning("apply_patch recovery: unreadable journal %s discarded", directory)
        shutil.rmtree(directory, ignore_errors=True)
        return {}
    roots = [Path(r) for r in manifest.get("roots", [])] + list(extra_roots)
    outcomes: dict[str, str] = {}
    touched: list[Path] = []
    for entry in reversed(manifest.get("entries", [])):
        target = Path(entry["target"])
        if not target.is_absolute() or not _allowed(target, roots):
            log.error("apply_patch recovery: %s is outside every root; skipped", target)
            outcomes[str(target)] = "refused"
            continue
        touched.append(target.parent)
        if manifest.get("full"):
            try:
                outcomes[str(target)] = _roll_back_entry(directory, entry)
            except OSError as exc:
                log.error("apply_patch recovery: could not restore %s: %s", target, exc)
                outcomes[str(target)] = "failed"
    created = [Path(d) for d in manifest.get("created_dirs", [])]
    sweep_temps(touched + created)
    # A directory the patch created is empty again unless its file landed whole.
    for made in reversed(created):
        if _allowed(made, roots):
            with contextlib.suppress(OSError):
                os.rmdir(made)
    os.unlink(manifest_path)
    shutil.rmtree(directory, ignore_errors=True)
    return outcomes


def recover_all(root: Path, extra_roots: Sequence[Path]) -> list[dict[str, str]]:
    """Replay every unfinished journal under ``root`` (oldest first)."""
    if not root.is_dir():
        return []
    results = []
    for directory in sorted(p for p in root.iterdir() if p.is_dir()):
        try:
            outcome = replay(directory, extra_roots)
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
