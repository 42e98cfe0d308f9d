"""Output kept in memory up to a cap, the rest spilled to the artifacts dir, within limits.

Two limits keep a chatty command from filling the disk: each command's spill
files together stop growing at ``per_exec_cap`` bytes (the file then holds the
first bytes of the stream: it is a record, not a tail), and the artifacts dir
as a whole stays under ``quota`` bytes by deleting the oldest spill files
(never one still being written). The quota is checked when a spill opens and
again every :data:`_QUOTA_CHECK_BYTES` written, so it can be exceeded by at
most that much per running command.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from airlock.daemon.rights import as_daemon

DEFAULT_PER_EXEC_CAP = 256 * 1024 * 1024
DEFAULT_QUOTA = 1024 * 1024 * 1024
_QUOTA_CHECK_BYTES = 8 * 1024 * 1024
_WRITE_BATCH = 1024 * 1024
SPILL_PREFIX = "exec-"


def new_call_id() -> str:
    """A sortable, unique name stem for one command's spill files."""
    return f"{SPILL_PREFIX}{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}"


@dataclass
class SpillStore:
    """The artifacts dir's spill files: their quota and the ones being written now."""

    directory: Path
    per_exec_cap: int = DEFAULT_PER_EXEC_CAP
    quota: int = DEFAULT_QUOTA
    writing: set[Path] = field(default_factory=set)

    def make_room(self, need: int) -> None:
        """Delete the oldest finished spill files until ``need`` more bytes fit the quota.

        Blocking (lists the directory): run it in a worker thread. The artifacts dir
        is the daemon's own, so this runs with the daemon's rights (daemon/rights.py).
        """
        with as_daemon():
            self._make_room(need)

    def _make_room(self, need: int) -> None:
        try:
            entries = [e for e in os.scandir(self.directory) if e.name.startswith(SPILL_PREFIX)]
        except FileNotFoundError:
            return
        files: list[tuple[float, int, Path]] = []
        total = 0
        for entry in entries:
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                total += st.st_size
                path = Path(entry.path)
                if entry.is_file(follow_symlinks=False) and path not in self.writing:
                    files.append((st.st_mtime, st.st_size, path))
        files.sort()
        for _mtime, size, path in files:
            if total + need <= self.quota:
                break
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size


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
    ) -> None:
        self.cap = cap
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
        self._since_check = 0
        self._pending = bytearray()

    async def feed(self, data: bytes) -> None:
        """Take one chunk; past the cap, the whole stream goes to the spill file.

        Spill writes run in a worker thread, in order (one batch of up to
        1 MiB awaited at a time), so a chatty command never blocks the event
        loop on disk.
        """
        if self._spill is None and self.total + len(data) > self.cap:
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
        if not data:
            return
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
        self._since_check += len(data)
        check = self.store is not None and self._since_check >= _QUOTA_CHECK_BYTES
        if check:
            self._since_check = 0
        await asyncio.to_thread(self._write_blocking, data, check)

    def _write_blocking(self, data: bytes, check_quota: bool) -> None:
        assert self._spill is not None
        self._spill.write(data)
        if check_quota and self.store is not None:
            self.store.make_room(0)

    def _open_spill(self) -> BinaryIO:
        with as_daemon():  # the artifacts dir is the daemon's own (daemon/rights.py)
            self.spill_path.parent.mkdir(parents=True, exist_ok=True)
            if self.store is not None:
                self.store.writing.add(self.spill_path)
                self.store.make_room(min(self.budget.remaining, _QUOTA_CHECK_BYTES))
            return open(self.spill_path, "wb")

    async def aclose(self) -> None:
        if self._spill is not None:
            await self._flush()
            await asyncio.to_thread(self._spill.close)
            if self.store is not None:
                self.store.writing.discard(self.spill_path)

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        data = bytes(self._head) if self.keep == "head" else b"".join(self._tail)[-self.cap :]
        return data.decode("utf-8", errors="replace")
