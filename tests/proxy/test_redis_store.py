"""The Redis store with a real redis-server: replicas share sessions and leases,
and losing Redis fails closed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from airlock.client.proxy import ProxyError
from airlock.proxy.protocol import LeaseRule
from airlock.proxy.store import base
from airlock.proxy.store.redis import RedisStore
from tests.fakes.proxy_harness import ProxyProcess, running_proxy
from tests.fakes.redis_server import RedisServer
from tests.fakes.tls import TestCA
from tests.fakes.upstream import EchoUpstream
from tests.fakes.wait import wait_until
from tests.proxy.helpers import api_rule, curl, placeholder, real_token

pytestmark = pytest.mark.timeout(120)


async def test_two_proxies_share_one_redis(
    replicas: tuple[ProxyProcess, ProxyProcess], github: EchoUpstream
) -> None:
    ph, real = placeholder(), real_token()
    a, b = replicas
    async with a.client() as ca, b.client() as cb:
        session = await ca.create_session(allow=["api.github.com"], ttl_s=60)
        # The session made through A authenticates at B.
        env_b = b.client_env(session)
        await ca.put_lease(session.session_id, "l1", [api_rule(ph, real)], ttl_s=60)
        status, body, err = await curl(
            env_b, "-H", f"Authorization: token {ph}", "https://api.github.com/b"
        )
        assert status == 200, err
        assert github.last().one("authorization") == f"Bearer {real}"
        assert real not in body
        assert [x.lease_id for x in await cb.list_leases(session.session_id)] == ["l1"]
        # Removed through B: A stops swapping at once.
        await cb.delete_lease(session.session_id, "l1")
        env_a = a.client_env(session)
        status, _, _ = await curl(
            env_a, "-H", f"Authorization: token {ph}", "https://api.github.com/a"
        )
        assert status == 200
        assert github.last().one("authorization") == f"token {ph}"
        # The session deleted through B is gone at A too.
        await cb.delete_session(session.session_id)
        status, _, _ = await curl(env_a, "https://api.github.com/a")
        assert status in (0, 407)
    for proxy in (a, b):
        for path in proxy.written_files():
            assert real.encode() not in path.read_bytes()


async def test_redis_loss_fails_closed(
    tmp_path: Path, redis: RedisServer, upstream_ca: TestCA, github: EchoUpstream
) -> None:
    resolve = [f"api.github.com:443:127.0.0.1:{github.port}"]
    ph, real = placeholder(), real_token()
    async with (
        running_proxy(
            tmp_path, resolve=resolve, upstream_ca=upstream_ca.ca_path, store=redis.url
        ) as proxy,
        proxy.client() as client,
    ):
        session = await client.create_session(allow=["api.github.com"], ttl_s=60)
        await client.put_lease(session.session_id, "l1", [api_rule(ph, real)], ttl_s=60)
        env = proxy.client_env(session)
        import ssl

        import httpx

        ctx = ssl.create_default_context(cafile=str(proxy.ca_path))
        async with httpx.AsyncClient(proxy=proxy.proxy_url(session), verify=ctx) as http:
            ok = await http.get(
                "https://api.github.com/1", headers={"authorization": f"token {ph}"}
            )
            assert ok.status_code == 200
            await asyncio.to_thread(redis.stop)
            github.clear()
            # Inside an open tunnel: the swap cannot be decided, nothing is forwarded.
            lost = await http.get(
                "https://api.github.com/2", headers={"authorization": f"token {ph}"}
            )
        assert lost.status_code == 503
        assert "store_unavailable" in lost.text
        assert github.requests == []
        # New connections cannot even authenticate: 503 at CONNECT.
        status, _, _ = await curl(
            env, "-H", f"Authorization: token {ph}", "https://api.github.com/3"
        )
        assert status == 0
        assert github.requests == []
        with pytest.raises(ProxyError) as health:
            await client.health()
        assert health.value.status == 503
        with pytest.raises(ProxyError) as create:
            await client.create_session(allow=[])
        assert (create.value.status, create.value.code) == (503, "store_unavailable")
        events = await proxy.await_audit(
            lambda e: e.get("reason") == "store_unavailable", what="store_unavailable refusal"
        )
    assert any(e.get("reason") == "store_unavailable" for e in events)


async def test_redis_store_records_expire_in_redis(redis: RedisServer) -> None:
    store = RedisStore(redis.url, prefix="t:")
    try:
        await store.ping()
        session = base.SessionRecord("s1", base.hash_secret("x"), ("a.example",), base.now() + 1)
        assert await store.create_session(session)
        assert not await store.create_session(session)
        rule = LeaseRule.model_validate(api_rule("airlock-gh-abcdefgh", "tok"))
        lease = base.LeaseRecord("s1", "l1", (rule,), base.now() + 0.5)
        assert not await store.put_lease(lease)
        got, owners = await store.lookup("s1", ["airlock-gh-abcdefgh", "unknown-placeholder"])
        assert got is not None and got.session_id == "s1"
        assert set(owners) == {"airlock-gh-abcdefgh"}
        assert owners["airlock-gh-abcdefgh"].rules[0].replace.token == "tok"

        async def lease_expired() -> bool:
            _, owners = await store.lookup("s1", ["airlock-gh-abcdefgh"])
            return owners == {}

        async def session_expired() -> bool:
            got, _ = await store.lookup("s1", [])
            return got is None

        # Redis expires the keys itself (TTLs); poll for it rather than sleep past it.
        await wait_until(lease_expired, timeout=15, message="the lease outlived its TTL")
        await wait_until(session_expired, timeout=15, message="the session outlived its TTL")
        assert await store.counts() == (0, 0)
    finally:
        await store.close()


async def test_unreachable_redis_raises_store_unavailable() -> None:
    store = RedisStore("redis://127.0.0.1:1/0", timeout_s=0.5)
    try:
        with pytest.raises(base.StoreUnavailable):
            await store.lookup("s", ["p"])
        with pytest.raises(base.StoreUnavailable):
            await store.ping()
    finally:
        await store.close()


async def test_concurrent_replicas_cannot_both_bind_a_placeholder(redis: RedisServer) -> None:
    stores = [RedisStore(redis.url, prefix="c:") for _ in range(2)]
    try:
        for i, store in enumerate(stores):
            await store.create_session(
                base.SessionRecord(f"s{i}", base.hash_secret("x"), (), base.now() + 60)
            )
        rule = LeaseRule.model_validate(api_rule("airlock-gh-contested", "tok"))
        for round_ in range(20):
            contested = rule.model_copy(update={"placeholder": f"airlock-gh-contested-{round_}"})
            results = await asyncio.gather(
                *(
                    store.put_lease(base.LeaseRecord(f"s{i}", "l", (contested,), base.now() + 60))
                    for i, store in enumerate(stores)
                ),
                return_exceptions=True,
            )
            conflicts = [r for r in results if isinstance(r, base.PlaceholderInUse)]
            assert len(conflicts) == 1, results
    finally:
        for store in stores:
            await store.close()
