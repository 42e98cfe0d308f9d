"""Events from audit lines: mapping, the limit throttle, the memory ring's long poll."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from airlock.proxy.events import EventTap, MemoryEvents, TappedAudit, map_audit
from tests.fakes.wait import yield_to_loop


@pytest.mark.parametrize(
    ("event", "fields", "expected"),
    [
        ("refusal", {"reason": "exfiltration_wrong_host", "status": 403}, "exfiltration_attempt"),
        ("refusal", {"reason": "lease_scope", "status": 403}, "lease_scope"),
        ("refusal", {"reason": "rate_limited", "status": 429}, "limit"),
        ("refusal", {"reason": "header_too_large", "status": 431}, "limit"),
        ("refusal", {"reason": "host_mismatch", "status": 403}, None),
        ("lease_created", {}, "lease_installed"),
        ("lease_replaced", {}, "lease_installed"),
        ("lease_deleted", {}, "lease_removed"),
        ("lease_expired", {}, "lease_expired"),
        ("session_deleted", {}, "session_closed"),
        ("session_expired", {}, "session_closed"),
        ("swap", {}, None),
    ],
)
def test_map_audit(event: str, fields: dict[str, object], expected: str | None) -> None:
    mapped = map_audit(event, {"session": "s1", **fields})
    assert (mapped[0] if mapped else None) == expected


def test_limit_events_are_throttled_per_session_and_reason() -> None:
    log = MemoryEvents()
    tap = EventTap(log)
    for _ in range(50):
        tap("refusal", {"reason": "rate_limited", "status": 429, "session": "s1"})
    tap("refusal", {"reason": "rate_limited", "status": 429, "session": "s2"})
    tap("refusal", {"reason": "lease_scope", "status": 403, "session": "s1"})
    events, nxt = asyncio.run(log.read(0, None, 0))
    assert [(e.type, e.session) for e in events] == [
        ("limit", "s1"),
        ("limit", "s2"),
        ("lease_scope", "s1"),
    ]
    assert nxt == 3


def test_ring_is_bounded_and_next_skips_other_sessions() -> None:
    log = MemoryEvents(capacity=3)
    for i in range(5):
        log.append("lease_installed", {"session": "a" if i % 2 else "b", "lease": f"l{i}"})
    events, nxt = asyncio.run(log.read(0, "a", 0))
    assert [e.seq for e in events] == [4] and nxt == 5
    assert asyncio.run(log.read(nxt, "a", 0)) == ([], 5)


def test_long_poll_wakes_on_a_new_event() -> None:
    async def scenario() -> tuple[list[int], float]:
        log = MemoryEvents()
        loop = asyncio.get_running_loop()
        started = loop.time()
        waiter = asyncio.create_task(log.read(0, "s1", 10))
        await yield_to_loop()  # let the reader start waiting
        log.append("lease_installed", {"session": "other"})
        log.append("lease_removed", {"session": "s1"})
        events, _ = await waiter
        return [e.seq for e in events], loop.time() - started

    seqs, took = asyncio.run(scenario())
    assert seqs == [2] and took < 5


def test_tapped_audit_feeds_the_tap(tmp_path: Path) -> None:
    audit = TappedAudit(tmp_path / "audit.log")
    log = MemoryEvents()
    audit.taps.append(EventTap(log))
    audit.write("lease_created", session="s1", lease="l1", hosts=["api.github.com"])
    audit.close()
    events, _ = asyncio.run(log.read(0, None, 0))
    assert events[0].type == "lease_installed"
    assert events[0].model_extra == {"lease": "l1", "hosts": ["api.github.com"]}
