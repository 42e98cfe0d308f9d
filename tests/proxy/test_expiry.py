"""The expiry watcher audits exactly the expiries nobody forgot.

``forget_session`` uses a per-session index (a DELETE must not scan every
watched lease of every session); this checks, over random sequences of
watch / forget / forget_session, that the watcher's pass writes the audit lines
a plain model of "what is still due" predicts. The store keeps the forgotten
records (the control API deletes them first; here they stay), so an entry the
watcher failed to forget would show as an audit line.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from airlock.proxy.audit import AuditLog
from airlock.proxy.expiry import ExpiryWatcher
from airlock.proxy.protocol import LeaseRule
from airlock.proxy.store.base import LeaseRecord, SessionRecord, hash_secret, now
from airlock.proxy.store.memory import MemoryStore
from tests.fakes.clock import FakeClock
from tests.fakes.wait import wait_until

SESSIONS = ["sa", "sb", "sc"]
LEASES = ["l1", "l2", "l3"]

Op = tuple[str, str, str, int]  # (kind, session, lease, milliseconds)

ops_strategy = st.lists(
    st.tuples(
        st.sampled_from(["watch", "watch", "forget", "forget_session"]),
        st.sampled_from(SESSIONS),
        st.sampled_from(LEASES),
        st.integers(0, 100),
    ),
    max_size=40,
)


def _rule(sid: str, lid: str) -> LeaseRule:
    return LeaseRule.model_validate(
        {
            "host": "api.github.com",
            "placeholder": f"airlock-ph-{sid}-{lid}",
            "schemes": ["token"],
            "replace": {"scheme": "token", "token": f"real-{sid}-{lid}"},
        }
    )


async def _audited(
    ops: list[Op], directory: Path, slack: int = 1024
) -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]:
    """(events the watcher wrote, events the model expects), both as (event, session, lease)."""
    store = MemoryStore()
    audit = AuditLog(directory / "audit.log")
    watcher = ExpiryWatcher(store, audit, compact_slack=slack)
    base = now() - 10  # everything already expired: one pass handles it all
    due: set[tuple[str, str]] = set()
    deleted: set[str] = set()
    for sid in SESSIONS:
        # Sessions expire after their leases, so the leases' lines come first.
        expires = base + 1
        await store.create_session(SessionRecord(sid, hash_secret("x"), (), expires))
        watcher.watch(sid, None, expires)
        due.add((sid, ""))
    for kind, sid, lid, ms in ops:
        if sid in deleted:
            continue  # the control API refuses leases of a deleted session
        if kind == "watch":
            expires = base + ms / 1000
            await store.put_lease(LeaseRecord(sid, lid, (_rule(sid, lid),), expires))
            watcher.watch(sid, lid, expires)
            due.add((sid, lid))
        elif kind == "forget":
            watcher.forget(sid, lid)
            due.discard((sid, lid))
        else:
            watcher.forget_session(sid)
            deleted.add(sid)
            due = {key for key in due if key[0] != sid}
    task = asyncio.create_task(watcher.run())
    # Everything is already due, so one pass empties the heap.
    await wait_until(lambda: watcher.pending() == 0, interval=0.001)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    audit.close()
    written = set()
    for line in (directory / "audit.log").read_text().splitlines():
        event = json.loads(line)
        written.add((event["event"], event["session"], event.get("lease", "")))
    expected = {("lease_expired" if lid else "session_expired", sid, lid) for sid, lid in due}
    return written, expected


@settings(max_examples=60, deadline=None)
@given(ops=ops_strategy, slack=st.sampled_from([0, 1024]))
def test_watcher_audits_what_is_still_due(ops: list[Op], slack: int) -> None:
    """Slack 0 compacts the heap on nearly every watch; 1024 never does here."""
    with tempfile.TemporaryDirectory() as directory:
        written, expected = asyncio.run(_audited(ops, Path(directory), slack))
    assert written == expected


def test_churn_does_not_grow_the_heap(tmp_path: Path) -> None:
    """PUT/DELETE of a lease in a loop (long TTL) keeps the heap near what is due."""
    audit = AuditLog(tmp_path / "audit.log")
    watcher = ExpiryWatcher(MemoryStore(), audit, compact_slack=100)
    watcher.watch("sa", None, now() + 3600)
    watcher.watch("sa", "kept", now() + 3600)
    for i in range(10_000):
        watcher.watch("sa", f"l{i % 7}", now() + 3600)
        watcher.forget("sa", f"l{i % 7}")
    assert watcher.pending() <= 2 * 2 + 100 + 1
    watcher.forget_session("sb")  # another session: nothing of sa is lost
    audit.close()


def test_forgetting_a_session_leaves_the_others_due(tmp_path: Path) -> None:
    ops: list[Op] = [
        ("watch", "sa", "l1", 10),
        ("watch", "sb", "l1", 20),
        ("watch", "sb", "l2", 30),
        ("forget_session", "sa", "", 0),
        ("forget", "sb", "l2", 0),
    ]
    written, expected = asyncio.run(_audited(ops, tmp_path))
    assert written == expected
    assert ("lease_expired", "sb", "l1") in written
    assert not {e for e in written if e[1] == "sa"}


async def test_the_watcher_and_the_store_judge_ttls_by_the_injected_clock(tmp_path: Path) -> None:
    """A lease is audited as expired when the clock passes its TTL, not a moment before."""
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    audit = AuditLog(tmp_path / "audit.log")
    looks = 0

    def watcher_clock() -> float:
        nonlocal looks
        looks += 1
        return clock()

    watcher = ExpiryWatcher(store, audit, tick_s=0.01, clock=watcher_clock)
    expires = clock() + 3600
    await store.create_session(SessionRecord("s", hash_secret("x"), (), clock() + 7200))
    await store.put_lease(LeaseRecord("s", "l", (_rule("s", "l"),), expires))
    watcher.watch("s", "l", expires)
    task = asyncio.create_task(watcher.run())

    def audited() -> list[str]:
        log = tmp_path / "audit.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [json.loads(line)["event"] for line in lines]

    try:
        # Several passes of the watcher go by (each looks at the clock twice): nothing is due.
        await wait_until(lambda: looks >= 10, message="the watcher never looked at its clock")
        assert watcher.pending() == 1 and "lease_expired" not in audited()
        assert await store.list_leases("s") != []
        clock.advance(3600)
        assert await store.list_leases("s") == []  # invisible at once
        await wait_until(lambda: watcher.pending() == 0, message="the lease was never audited")
        await wait_until(lambda: "lease_expired" in audited(), message="no lease_expired line")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        audit.close()


def test_the_context_judges_ttls_by_its_stores_clock_unless_told(tmp_path: Path) -> None:
    """``ProxyContext.create``: one clock for the store, the watcher and the control API."""
    from airlock.proxy.context import ProxyContext
    from tests.proxy.addons.ops_support import make_harness

    made = make_harness(tmp_path).ctx
    config, audit = made.config, made.audit
    try:
        clock = FakeClock(start=1000.0)
        ctx = ProxyContext.create(config, MemoryStore(clock=clock), audit)
        assert ctx.clock is clock and ctx.expiry._clock is clock
        other = FakeClock(start=5.0)
        assert ProxyContext.create(config, MemoryStore(), audit, clock=other).clock() == 5.0
        assert abs(ProxyContext.create(config, MemoryStore(), audit).clock() - now()) < 60
    finally:
        audit.close()
