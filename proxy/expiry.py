"""Audits expiries of sessions and leases this process created.

Expired records stop working the instant their time passes (every store read
checks ``expires_at``; Redis keys carry PX expiries). This watcher only reclaims
memory and writes the ``*_expired`` audit lines, so it can run coarse-grained.

What is due is indexed by session too, so forgetting a deleted session costs
its own leases, not every lease of every session (with 10,000 sessions a
DELETE used to scan 110,000 keys, and tearing them all down was quadratic).
Forgotten and re-watched entries stay in the heap (skipped when their time
comes) until the heap holds more than twice what is due plus ``compact_slack``;
then it is rebuilt from what is due. Without that, a client that replaces or
deletes leases in a loop grew the heap by one entry per PUT for a whole TTL,
whatever few leases were live.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging

from .audit import AuditLog
from .store.base import Clock, Store, StoreUnavailable, now

log = logging.getLogger("airlock.proxy.expiry")

Key = tuple[str, str]  # (session_id, lease_id or "")


class ExpiryWatcher:
    def __init__(
        self,
        store: Store,
        audit: AuditLog,
        *,
        tick_s: float = 0.5,
        compact_slack: int = 1024,
        clock: Clock = now,
    ) -> None:
        """``clock`` says when something is due (the store's clock; tests move a fake one)."""
        self._store = store
        self._clock = clock
        self._audit = audit
        self._tick = tick_s
        self._slack = compact_slack
        self._heap: list[tuple[float, str, str]] = []
        self._due: dict[Key, float] = {}
        # session id -> the lease ids ("" for the session itself) in ``_due``.
        self._by_session: dict[str, set[str]] = {}
        self._wake = asyncio.Event()

    def watch(self, session_id: str, lease_id: str | None, expires_at: float) -> None:
        key = (session_id, lease_id or "")
        self._due[key] = expires_at
        self._by_session.setdefault(session_id, set()).add(key[1])
        heapq.heappush(self._heap, (expires_at, session_id, lease_id or ""))
        if len(self._heap) > 2 * len(self._due) + self._slack:
            self._compact()
        self._wake.set()

    def _compact(self) -> None:
        """Keep only the heap entries still due (amortised O(1) per watch)."""
        self._heap = [e for e in self._heap if self._due.get((e[1], e[2])) == e[0]]
        heapq.heapify(self._heap)

    def pending(self) -> int:
        """Entries the heap holds, skipped ones included (a bound on its memory)."""
        return len(self._heap)

    def forget(self, session_id: str, lease_id: str | None) -> None:
        lid = lease_id or ""
        self._due.pop((session_id, lid), None)
        ids = self._by_session.get(session_id)
        if ids is not None:
            ids.discard(lid)
            if not ids:
                del self._by_session[session_id]

    def forget_session(self, session_id: str) -> None:
        for lid in self._by_session.pop(session_id, ()):
            self._due.pop((session_id, lid), None)

    async def run(self) -> None:
        while True:
            self._wake.clear()
            at_now = self._clock()
            while self._heap and self._heap[0][0] <= at_now:
                at, sid, lid = heapq.heappop(self._heap)
                if self._due.get((sid, lid)) != at:
                    continue
                try:
                    if lid:
                        gone = await self._store.expire_lease(sid, lid, at)
                    else:
                        gone = await self._store.expire_session(sid, at)
                except StoreUnavailable:
                    heapq.heappush(self._heap, (at, sid, lid))
                    break
                self.forget(sid, lid)
                if gone:
                    if lid:
                        self._audit.write("lease_expired", session=sid, lease=lid)
                    else:
                        self.forget_session(sid)
                        self._audit.write("session_expired", session=sid)
            delay = self._tick
            if self._heap:
                delay = min(delay, max(0.01, self._heap[0][0] - self._clock()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)
