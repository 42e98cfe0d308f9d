"""How many records are live, kept as they come and go (for ``/metrics``).

Counting by walking every record on each scrape cost 22 ms of event loop at
100k leases. :class:`LiveCount` keeps the number instead: adding or removing a
record is O(log n), and reading the count only pops the records whose expiry
passed since the last read. A record is live from when it is added until it is
removed or its ``expires_at`` passes, whichever comes first, exactly as the
stores' own reads decide (``expires_at > now``).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class LiveCount(Generic[K]):
    def __init__(self, *, compact_slack: int = 1024) -> None:
        self._expires: dict[K, float] = {}
        self._heap: list[tuple[float, int, K]] = []
        self._lapsed: set[K] = set()  # held, but their time passed (already uncounted)
        self._live = 0
        self._seq = 0  # heap tie-breaker: keys need not be comparable
        self._slack = compact_slack

    def add(self, key: K, expires_at: float, now: float) -> None:
        """``key`` is held until ``expires_at`` (replacing what it was)."""
        self.discard(key)
        self._expires[key] = expires_at
        if expires_at > now:
            self._live += 1
            self._seq += 1
            heapq.heappush(self._heap, (expires_at, self._seq, key))
            if len(self._heap) > 2 * len(self._expires) + self._slack:
                self._compact()
        else:
            self._lapsed.add(key)

    def discard(self, key: K) -> None:
        """``key`` is no longer held (idempotent)."""
        if self._expires.pop(key, None) is None:
            return
        if key in self._lapsed:
            self._lapsed.discard(key)
        else:
            self._live -= 1

    def count(self, now: float) -> int:
        """Records held whose time has not passed."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, _, key = heapq.heappop(heap)
            if self._expires.get(key) == at and key not in self._lapsed:
                self._lapsed.add(key)
                self._live -= 1
        return self._live

    def _compact(self) -> None:
        """Drop heap entries of records removed or replaced since they were pushed."""
        self._heap = [
            e for e in self._heap if self._expires.get(e[2]) == e[0] and e[2] not in self._lapsed
        ]
        heapq.heapify(self._heap)

    def __len__(self) -> int:
        """Records held, lapsed ones included (what the store still keeps in memory)."""
        return len(self._expires)
