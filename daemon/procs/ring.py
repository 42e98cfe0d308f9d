"""A background process's output: stdout and stderr on one offset line, in a bounded ring.

Offsets count the bytes of both streams together, in the order they arrived,
so one ``next_offset`` is enough to continue reading. Only the newest
``capacity`` bytes are kept; a reader asking for older bytes gets what is
still there and ``dropped`` says how many it missed. Memory stays at the
capacity however much a process prints.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .utf8 import split_incomplete_tail

DEFAULT_CAPACITY = 8 * 1024 * 1024


@dataclass(frozen=True)
class RingRead:
    stdout: str
    stderr: str
    next_offset: int
    dropped: int


class OutputRing:
    """Records ``(stream, bytes)`` with their combined offsets; old records fall off."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._records: deque[tuple[int, str, bytes]] = deque()  # (offset, stream, data)
        self._size = 0
        self.start = 0  # offset of the oldest byte kept
        self.end = 0  # offset after the newest byte

    def append(self, stream: str, data: bytes) -> None:
        if not data:
            return
        if len(data) > self.capacity:
            skipped = len(data) - self.capacity
            data = data[skipped:]
            self.end += skipped
        self._records.append((self.end, stream, data))
        self.end += len(data)
        self._size += len(data)
        while self._size > self.capacity:
            offset, name, old = self._records[0]
            excess = self._size - self.capacity
            if len(old) <= excess:
                self._records.popleft()
                self._size -= len(old)
            else:
                self._records[0] = (offset + excess, name, old[excess:])
                self._size -= excess
        self.start = self._records[0][0] if self._records else self.end

    def read(self, offset: int, max_bytes: int, *, complete: bool) -> RingRead:
        """Up to ``max_bytes`` from ``offset``; ``complete`` when no more output will come.

        A character cut by ``max_bytes`` (or still being written) is left for
        the next read rather than decoded into two replacement characters.
        """
        dropped = 0
        if offset < self.start:
            dropped = self.start - offset
            offset = self.start
        offset = min(offset, self.end)
        stop = min(self.end, offset + max_bytes)
        parts: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        last_stream: str | None = None
        for rec_offset, stream, data in self._records:
            rec_end = rec_offset + len(data)
            if rec_end <= offset:
                continue
            if rec_offset >= stop:
                break
            parts[stream].append(data[max(0, offset - rec_offset) : stop - rec_offset])
            last_stream = stream
        next_offset = stop
        if last_stream is not None and not (complete and stop == self.end):
            tail = parts[last_stream][-1]
            cut = len(tail) - split_incomplete_tail(tail)
            if cut and next_offset - cut > offset:  # trim, unless nothing would be left
                next_offset -= cut
                parts[last_stream][-1] = tail[: len(tail) - cut]
        return RingRead(
            stdout=b"".join(parts["stdout"]).decode("utf-8", errors="replace"),
            stderr=b"".join(parts["stderr"]).decode("utf-8", errors="replace"),
            next_offset=next_offset,
            dropped=dropped,
        )
