"""Closes connections whose session is gone, whichever replica deleted it.

The control API closes a deleted session's connections on the replica that
served the DELETE at once (:meth:`Connections.close_session`). Other replicas
sharing Redis, and sessions that simply expire, are caught here: every
``interval_s`` the sessions held by open connections are read in one batch
(one ``MGET`` on Redis) and every connection whose session is missing, or has
another generation, is closed. Passthrough tunnels have no per-request check,
so this (and the DELETE) is what ends them.
"""

from __future__ import annotations

import asyncio
import logging

from .audit import AuditLog
from .state import Connections
from .store.base import Store, StoreUnavailable

log = logging.getLogger("airlock.proxy.reaper")


class SessionReaper:
    def __init__(
        self, store: Store, connections: Connections, audit: AuditLog, *, interval_s: float = 1.0
    ) -> None:
        self._store = store
        self._connections = connections
        self._audit = audit
        self._interval = interval_s

    async def sweep(self) -> int:
        """One pass; the number of connections closed."""
        held = self._connections.live_sessions()
        if not held:
            return 0
        try:
            current = await self._store.get_sessions(sorted(held))
        except StoreUnavailable:
            return 0  # the per-request checks fail closed meanwhile
        closed = 0
        for sid, generations in held.items():
            record = current.get(sid)
            if record is None:
                closed += self._connections.close_session(sid, "session_gone")
            elif generations - {record.generation}:
                closed += self._connections.close_session(
                    sid, "session_replaced", keep=record.generation
                )
        return closed

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.sweep()
            except Exception:  # never let the sweeper die
                log.exception("session reaper pass failed")
