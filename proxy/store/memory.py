"""In-process store: dicts keyed for O(1) lookups, expiry checked on read.

Expired records are invisible the moment their time passes (every read checks
``expires_at``); :meth:`MemoryStore.expire_lease` and friends reclaim the memory
and let the caller write the audit line. The live counts for ``/metrics`` are
kept as records come and go (:class:`~.census.LiveCount`), never counted by
walking the dicts.
"""

from __future__ import annotations

from collections.abc import Sequence

from .base import (
    Clock,
    LeaseRecord,
    PlaceholderEntry,
    PlaceholderInUse,
    SessionRecord,
    Store,
    now,
)
from .census import LiveCount


class MemoryStore(Store):
    kind = "memory"

    def __init__(self, clock: Clock = now) -> None:
        self.clock = clock
        self._sessions: dict[str, SessionRecord] = {}
        self._leases: dict[str, dict[str, LeaseRecord]] = {}
        self._placeholders: dict[str, PlaceholderEntry] = {}
        self._live_sessions: LiveCount[str] = LiveCount()
        self._live_leases: LiveCount[tuple[str, str]] = LiveCount()

    async def ping(self) -> None:
        return None

    async def create_session(self, record: SessionRecord) -> bool:
        existing = self._sessions.get(record.session_id)
        if existing is not None and existing.live(self.clock()):
            return False
        if existing is not None:
            self._drop_session(record.session_id)
        self._sessions[record.session_id] = record
        self._leases[record.session_id] = {}
        self._live_sessions.add(record.session_id, record.expires_at, self.clock())
        return True

    async def get_session(self, session_id: str) -> SessionRecord | None:
        record = self._sessions.get(session_id)
        return record if record is not None and record.live(self.clock()) else None

    def _drop_session(self, session_id: str) -> list[str]:
        self._sessions.pop(session_id, None)
        self._live_sessions.discard(session_id)
        leases = self._leases.pop(session_id, {})
        for lease in leases.values():
            self._unindex(lease)
            self._live_leases.discard((session_id, lease.lease_id))
        return sorted(lid for lid, lease in leases.items() if lease.live(self.clock()))

    async def delete_session(self, session_id: str) -> tuple[bool, list[str]]:
        existed = await self.get_session(session_id) is not None
        return existed, self._drop_session(session_id)

    def _unindex(self, lease: LeaseRecord) -> None:
        for ph in lease.placeholders:
            entry = self._placeholders.get(ph)
            if entry and (entry.session_id, entry.lease_id) == (lease.session_id, lease.lease_id):
                del self._placeholders[ph]

    async def put_lease(self, record: LeaseRecord) -> bool:
        at = self.clock()
        for ph in record.placeholders:
            entry = self._placeholders.get(ph)
            if (
                entry is not None
                and entry.live(at)
                and (entry.session_id, entry.lease_id) != (record.session_id, record.lease_id)
            ):
                raise PlaceholderInUse(ph)
        leases = self._leases.setdefault(record.session_id, {})
        old = leases.get(record.lease_id)
        if old is not None:
            self._unindex(old)
        leases[record.lease_id] = record
        for ph in record.placeholders:
            self._placeholders[ph] = record.entry_for(ph)
        self._live_leases.add((record.session_id, record.lease_id), record.expires_at, at)
        return old is not None and old.live(at)

    async def delete_lease(self, session_id: str, lease_id: str) -> bool:
        lease = self._leases.get(session_id, {}).pop(lease_id, None)
        if lease is None:
            return False
        self._unindex(lease)
        self._live_leases.discard((session_id, lease_id))
        return lease.live(self.clock())

    async def list_leases(self, session_id: str) -> list[LeaseRecord]:
        at = self.clock()
        leases = self._leases.get(session_id, {})
        return sorted(
            (lease for lease in leases.values() if lease.live(at)), key=lambda x: x.lease_id
        )

    async def lookup(
        self, session_id: str, placeholders: Sequence[str]
    ) -> tuple[SessionRecord | None, dict[str, PlaceholderEntry]]:
        at = self.clock()
        session = self._sessions.get(session_id)
        if session is not None and not session.live(at):
            session = None
        found: dict[str, PlaceholderEntry] = {}
        for ph in placeholders:
            entry = self._placeholders.get(ph)
            if entry is not None and entry.live(at):
                found[ph] = entry
        return session, found

    async def counts(self) -> tuple[int, int]:
        at = self.clock()
        return self._live_sessions.count(at), self._live_leases.count(at)

    async def expire_session(self, session_id: str, expires_at: float) -> bool:
        record = self._sessions.get(session_id)
        if record is None or record.expires_at != expires_at or record.live(self.clock()):
            return False
        self._drop_session(session_id)
        return True

    async def expire_lease(self, session_id: str, lease_id: str, expires_at: float) -> bool:
        leases = self._leases.get(session_id, {})
        lease = leases.get(lease_id)
        if lease is None or lease.expires_at != expires_at or lease.live(self.clock()):
            return False
        del leases[lease_id]
        self._unindex(lease)
        self._live_leases.discard((session_id, lease_id))
        return True
