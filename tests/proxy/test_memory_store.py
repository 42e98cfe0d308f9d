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
from tests.fakes.wait import wait_until


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
    store = MemoryStore()
    await store.create_session(SessionRecord("s", hash_secret("x"), (), now() + 60))
    at = now() + 0.2
    await store.put_lease(LeaseRecord("s", "l", (_rule("ph-cccccccc"),), at))
    assert not await store.expire_lease("s", "l", at)  # not yet
    await wait_until(lambda: now() > at, message="the clock never passed the expiry")
    _, owners = await store.lookup("s", ["ph-cccccccc"])
    assert owners == {}
    assert await store.list_leases("s") == []
    assert await store.expire_lease("s", "l", at)
    assert not await store.expire_lease("s", "l", at)
    assert not await store.delete_lease("s", "l")
