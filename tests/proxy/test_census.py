"""LiveCount: the number of live records, kept as they come and go."""

from __future__ import annotations

from airlock.proxy.store.census import LiveCount


def test_counts_follow_adds_removals_replacements_and_expiry() -> None:
    live: LiveCount[str] = LiveCount()
    live.add("a", 10.0, now=0.0)
    live.add("b", 20.0, now=0.0)
    live.add("c", 30.0, now=0.0)
    assert live.count(0.0) == 3
    live.discard("b")
    live.discard("b")  # idempotent
    assert live.count(0.0) == 2
    assert live.count(10.0) == 1  # "a" expires at 10: not live at 10 (expires_at > now)
    live.add("a", 40.0, now=11.0)  # renewed after it lapsed
    assert live.count(11.0) == 2
    live.add("c", 12.0, now=11.0)  # replaced with a shorter life
    assert live.count(12.5) == 1
    live.discard("c")  # removing a lapsed record does not count it twice
    assert live.count(12.5) == 1
    live.add("d", 5.0, now=12.5)  # already past
    assert live.count(12.5) == 1 and len(live) == 2
    assert live.count(100.0) == 0


def test_heap_stays_bounded_under_replacement_loops() -> None:
    live: LiveCount[tuple[str, str]] = LiveCount(compact_slack=16)
    for i in range(10_000):
        live.add(("s", "l"), 1000.0 + i, now=0.0)
    assert live.count(0.0) == 1
    assert len(live._heap) <= 2 * len(live) + 16 + 1
