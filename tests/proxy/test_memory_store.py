"""MemoryStore semantics: conflicts, replacement, expiry visible at once."""

from __future__ import annotations

import pytest

from airlock.proxy.protocol import LeaseRule
from airlock.proxy.store.base import (
    LeaseRecord,
    PlaceholderInUse,
    SessionRecord,
    hash_secret,
    now,
)
from airlock.proxy.store.memory import MemoryStore
from tests.fakes.clock import FakeClock


def _rule(ph: str, host: str = "api.github.com") -> LeaseRule:
    return LeaseRule.model_validate(
        {
            "host": host,
            "placeholder": ph,
            "schemes": ["token", "bearer"],
            "replace": {"scheme": "bearer", "token": "real"},
        }
    )


async def test_sessions_leases_and_placeholder_index() -> None:
    store = MemoryStore()
    s = SessionRecord("s", hash_secret("secret"), ("api.github.com",), now() + 60)
    assert await store.create_session(s)
    assert not await store.create_session(s)
    assert s.check_secret("secret") and not s.check_secret("nope")

    assert not await store.put_lease(LeaseRecord("s", "a", (_rule("ph-aaaaaaaa"),), now() + 60))
    _, owners = await store.lookup("s", ["ph-aaaaaaaa"])
    assert owners["ph-aaaaaaaa"].lease_id == "a"

    # Replacing a lease re-indexes: the old placeholder stops resolving.
    assert await store.put_lease(LeaseRecord("s", "a", (_rule("ph-bbbbbbbb"),), now() + 60))
    _, owners = await store.lookup("s", ["ph-aaaaaaaa", "ph-bbbbbbbb"])
    assert set(owners) == {"ph-bbbbbbbb"}

    # Another session (or lease) cannot claim a live placeholder.
    await store.create_session(SessionRecord("t", hash_secret("x"), (), now() + 60))
    with pytest.raises(PlaceholderInUse):
        await store.put_lease(LeaseRecord("t", "a", (_rule("ph-bbbbbbbb"),), now() + 60))
    with pytest.raises(PlaceholderInUse):
        await store.put_lease(LeaseRecord("s", "other", (_rule("ph-bbbbbbbb"),), now() + 60))

    assert await store.counts() == (2, 1)
    existed, removed = await store.delete_session("s")
    assert existed and removed == ["a"]
    assert (await store.lookup("s", ["ph-bbbbbbbb"])) == (None, {})
    # Once freed, the placeholder can be bound again.
    await store.put_lease(LeaseRecord("t", "a", (_rule("ph-bbbbbbbb"),), now() + 60))


async def test_expiry_is_exact_and_reclaimed() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    await store.create_session(SessionRecord("s", hash_secret("x"), (), clock() + 60))
    at = clock() + 0.2
    await store.put_lease(LeaseRecord("s", "l", (_rule("ph-cccccccc"),), at))
    assert not await store.expire_lease("s", "l", at)  # not yet
    clock.advance(0.2)  # exactly at the expiry: no longer live
    _, owners = await store.lookup("s", ["ph-cccccccc"])
    assert owners == {}
    assert await store.list_leases("s") == []
    assert await store.expire_lease("s", "l", at)
    assert not await store.expire_lease("s", "l", at)
    assert not await store.delete_lease("s", "l")


async def test_counts_are_kept_across_expiry_revocation_and_replacement() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    at = clock()
    for sid in ("s1", "s2"):
        assert await store.create_session(SessionRecord(sid, hash_secret("x"), (), at + 60))
    await store.put_lease(LeaseRecord("s1", "a", (_rule("ph-count-a"),), at + 60))
    await store.put_lease(LeaseRecord("s1", "b", (_rule("ph-count-b"),), at + 0.2))
    await store.put_lease(LeaseRecord("s2", "c", (_rule("ph-count-c"),), at + 60))
    assert await store.counts() == (2, 3)
    await store.put_lease(LeaseRecord("s1", "a", (_rule("ph-count-a"),), at + 60))  # replaced
    assert await store.counts() == (2, 3)
    await store.delete_lease("s2", "c")  # revoked
    assert await store.counts() == (2, 2)

    clock.advance(0.2)
    assert await store.counts() == (2, 1)  # the short lease stops counting
    assert await store.expire_lease("s1", "b", at + 0.2)  # reclaimed: still not counted twice
    assert await store.counts() == (2, 1)
    await store.delete_session("s1")  # takes its lease with it
    assert await store.counts() == (1, 0)


class _NoWalk(dict):  # type: ignore[type-arg]
    """A dict that fails the test if anything iterates it."""

    def values(self):  # type: ignore[no-untyped-def]
        raise AssertionError("counts() walked the store")

    def items(self):  # type: ignore[no-untyped-def]
        raise AssertionError("counts() walked the store")

    def __iter__(self):  # type: ignore[no-untyped-def]
        raise AssertionError("counts() walked the store")


async def test_counts_do_not_walk_the_records() -> None:
    store = MemoryStore()
    at = now()
    for i in range(200):
        assert await store.create_session(SessionRecord(f"s{i}", hash_secret("x"), (), at + 60))
        await store.put_lease(LeaseRecord(f"s{i}", "l", (_rule(f"ph-walk-{i:04d}"),), at + 60))
    store._sessions = _NoWalk(store._sessions)
    store._leases = _NoWalk(store._leases)
    assert await store.counts() == (200, 200)
