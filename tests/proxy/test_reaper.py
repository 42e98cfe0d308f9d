"""The session reaper closes connections of deleted or replaced sessions."""

from __future__ import annotations

import time
from pathlib import Path

from airlock.proxy.audit import AuditLog
from airlock.proxy.reaper import SessionReaper
from airlock.proxy.state import Connections
from airlock.proxy.store.base import SessionRecord, hash_secret
from airlock.proxy.store.memory import MemoryStore


async def test_sweep_closes_gone_and_replaced_sessions_only(tmp_path: Path) -> None:
    store = MemoryStore()
    live = SessionRecord("live", hash_secret("x"), (), time.time() + 60)
    await store.create_session(live)
    conns = Connections()
    killed: list[tuple[str, str]] = []
    conns.set_killer(lambda cid, reason: killed.append((cid, reason)))
    for cid, sid, gen in [
        ("c1", "live", live.generation),
        ("c2", "live", "stale-generation"),
        ("c3", "gone", "g"),
        ("c4", None, None),
    ]:
        st = conns.state(cid)
        st.session_id, st.generation = sid, gen
    audit = AuditLog(tmp_path / "a.log", interval_s=3600)
    reaper = SessionReaper(store, conns, audit, interval_s=0.01)
    assert await reaper.sweep() == 2
    assert sorted(killed) == [("c2", "session_replaced"), ("c3", "session_gone")]
    assert await reaper.sweep() == 0  # closing connections are not counted twice
    audit.close()
