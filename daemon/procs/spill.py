"""Output kept in memory up to a cap, the rest spilled to the artifacts dir, within limits.

Two limits keep a chatty command from filling the disk: each command's spill
files together stop growing at ``per_exec_cap`` bytes (the file then holds the
first bytes of the stream: it is a record, not a tail), and the artifacts dir
as a whole stays under ``quota`` bytes. The quota holds under any number of
concurrent commands because spilling is *reserved*: before a stream writes a
batch it reserves room (:meth:`SpillStore.reserve`, under one lock), which
counts every finished spill on disk plus every reservation in flight, and
deletes the oldest finished spills to make room. When nothing more can be
deleted the stream gets what is left (possibly nothing) and its spill stops
there, as at the per-exec cap. A spill of a call that has not returned yet is
never deleted: a returned ``spill_path`` exists when the caller reads the
answer, and only later spills may remove it, oldest first.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ..rights import as_daemon

DEFAULT_PER_EXEC_CAP = 256 * 1024 * 1024
DEFAULT_QUOTA = 1024 * 1024 * 1024
_RESERVE_STEP = 1024 * 1024
_WRITE_BATCH = 1024 * 1024
SPILL_PREFIX = "exec-"


def new_call_id() -> str:
    """A sortable, unique name stem for one command's spill files."""
    return f"{SPILL_PREFIX}{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}"


@dataclass
class SpillStore:
    """The artifacts dir's spill files: their quota, the reservations and the protected files."""

    directory: Path
    per_exec_cap: int = DEFAULT_PER_EXEC_CAP
    quota: int = DEFAULT_QUOTA
    # Spills of calls still running (being written, or written but not returned yet).
    writing: set[Path] = field(default_factory=set)
    reserved: dict[Path, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reserve(self, path: Path, want: int) -> int:
        """Room for ``want`` more bytes of ``path``; returns what was granted (0..want).

        Blocking (lists the directory, may delete files): run it in a worker thread.
        """
        with self._lock:
            self.writing.add(path)
            free = self._make_room(want)
            granted = max(0, min(want, free))
            self.reserved[path] = self.reserved.get(path, 0) + granted
            return granted

    def settle(self, path: Path, size: int) -> None:
        """``path`` is closed at ``size`` bytes: its reservation becomes its size."""
        with self._lock:
            if path in self.reserved:
                self.reserved[path] = size

    def release(self, *paths: Path) -> None:
        """The call returned: its spills are ordinary finished files from now on."""
        with self._lock:
            for path in paths:
                self.writing.discard(path)
                self.reserved.pop(path, None)

    def make_room(self, need: int) -> None:
        """Delete the oldest finished spill files until ``need`` more bytes fit the quota.

        Blocking (lists the directory): run it in a worker thread.
        """
        with self._lock:
            self._make_room(need)

    def _make_room(self, need: int) -> int:
        """Under the lock: delete oldest finished spills until ``need`` fits; the room left.
        The artifacts dir is the daemon's own: its rights (daemon/rights.py)."""
        with as_daemon():
            return self._make_room_as_daemon(need)

    def _make_room_as_daemon(self, need: int) -> int:
        try:
            entries = [e for e in os.scandir(self.directory) if e.name.startswith(SPILL_PREFIX)]
        except FileNotFoundError:
            entries = []
        files: list[tuple[float, int, Path]] = []
        total = 0
        for entry in entries:
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                path = Path(entry.path)
                if path in self.reserved:
                    continue  # counted by its reservation below
                total += st.st_size
                if entry.is_file(follow_symlinks=False) and path not in self.writing:
                    files.append((st.st_mtime, st.st_size, path))
        total += sum(self.reserved.values())
        files.sort()
        for _mtime, size, path in files:
            if total + need <= self.quota:
                break
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size
        return self.quota - total


@dataclass
class SpillBudget:
    """What one command may still spill, shared by its stdout and stderr files."""

    remaining: int


class CappedStream:
    """Keeps the head or the tail of a stream in memory, spilling the whole to disk past the cap."""

    def __init__(
        self,
        cap: int,
        keep: str,
        spill_path: Path,
        store: SpillStore | None = None,
        budget: SpillBudget | None = None,
        *,
        spill: bool = True,
    ) -> None:
        self.cap = cap
        # False: keep only the head or tail in memory (a stream client already holds the rest).
        self.spill = spill
        self.keep = keep
        self.spill_path = spill_path
        self.store = store
        self.budget = budget if budget is not None else SpillBudget(DEFAULT_PER_EXEC_CAP)
        self.total = 0
        self.spilled = 0
        self.spill_truncated = False
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_len = 0
        self._spill: BinaryIO | None = None
        self._room = 0  # quota bytes reserved and not written yet
        self._pending = bytearray()

    async def feed(self, data: bytes) -> None:
        """Take one chunk; past the cap, the whole stream goes to the spill file.

        Spill writes run in a worker thread, in order (one batch of up to
        1 MiB awaited at a time), so a chatty command never blocks the event
        loop on disk.
        """
        if self._spill is None and self.spill and self.total + len(data) > self.cap:
            earlier = bytes(self._head) if self.keep == "head" else b"".join(self._tail)
            self._spill = await asyncio.to_thread(self._open_spill)
            data_to_spill = earlier + data
        else:
            data_to_spill = data
        self.total += len(data)
        if self._spill is not None and not self.spill_truncated:
            await self._write_spill(data_to_spill)
        if self.keep == "head":
            room = self.cap - len(self._head)
            if room > 0:
                self._head += data[:room]
        else:
            self._tail.append(data)
            self._tail_len += len(data)
            while self._tail_len - len(self._tail[0]) >= self.cap:
                self._tail_len -= len(self._tail.popleft())

    async def _write_spill(self, data: bytes) -> None:
        if len(data) > self.budget.remaining:
            data = data[: self.budget.remaining]
            self.spill_truncated = True
        if self.store is not None and len(data) > self._room:
            want = max(len(data) - self._room, min(_RESERVE_STEP, self.budget.remaining))
            self._room += await asyncio.to_thread(self.store.reserve, self.spill_path, want)
            if len(data) > self._room:
                data = data[: self._room]
                self.spill_truncated = True  # the quota is spoken for: the spill stops here
        if not data:
            return
        self._room -= len(data)
        self.budget.remaining -= len(data)
        self.spilled += len(data)
        self._pending += data
        if len(self._pending) >= _WRITE_BATCH:
            await self._flush()

    async def _flush(self) -> None:
        """Hand the batched bytes to a worker thread (one hop per MiB, not per pipe read)."""
        if not self._pending or self._spill is None:
            return
        data, self._pending = bytes(self._pending), bytearray()
        await asyncio.to_thread(self._spill.write, data)

    def _open_spill(self) -> BinaryIO:
        with as_daemon():  # the artifacts dir is the daemon's own (daemon/rights.py)
            self.spill_path.parent.mkdir(parents=True, exist_ok=True)
            if self.store is not None:
                self.store.reserve(self.spill_path, 0)  # protected from the quota from now on
            return open(self.spill_path, "wb")

    async def aclose(self) -> None:
        if self._spill is not None:
            await self._flush()
            await asyncio.to_thread(self._spill.close)
            if self.store is not None:
                self.store.settle(self.spill_path, self.spilled)

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        data = bytes(self._head) if self.keep == "head" else b"".join(self._tail)[-self.cap :]
        return data.decode("utf-8", errors="replace")
