"""``/metrics`` keeps running counts instead of walking the store (issue 22).

A scrape used to ``SCAN`` every key of a Redis store (1.2 s per replica at
100k leases) or walk every record of the memory store. Against a real
``redis-server`` shared by two replicas: a scrape is a handful of commands,
never ``SCAN`` or ``KEYS``, whatever the number of keys, and the numbers are
right on both replicas across creation, revocation on the other replica,
session deletion and lease expiry (a replica's gauges are the store-wide
live counts: the same on every replica).
"""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio as aioredis

from tests.fakes.proxy_harness import ProxyProcess, running_proxy
from tests.fakes.redis_server import RedisServer
from tests.fakes.wait import wait_until
from tests.proxy.helpers import api_rule, placeholder, real_token

pytestmark = pytest.mark.timeout(120)


async def _scrape(proxy: ProxyProcess) -> tuple[int, int]:
    sock = proxy.control.removeprefix("unix:")
    async with (
        aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=sock)) as http,
        http.get("http://proxy/metrics") as resp,
    ):
        assert resp.status == 200
        text = await resp.text()

    def gauge(name: str) -> int:
        match = re.search(rf"^{name} (\S+)$", text, re.M)
        assert match, name
        return int(float(match.group(1)))

    return gauge("airlock_proxy_active_sessions"), gauge("airlock_proxy_active_leases")


async def _commands(client: aioredis.Redis) -> dict[str, int]:
    stats = await client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


async def test_scrape_counts_without_scanning_across_replicas(
    tmp_path: Path, redis: RedisServer
) -> None:
    client = aioredis.Redis.from_url(redis.url)
    async with (
        running_proxy(tmp_path / "a", store=redis.url) as a,
        running_proxy(tmp_path / "b", store=redis.url) as b,
        a.client() as ca,
        b.client() as cb,
    ):
        sessions = [await ca.create_session(allow=[], ttl_s=120) for _ in range(30)]
        sessions += [await cb.create_session(allow=[], ttl_s=120) for _ in range(30)]
        for i, info in enumerate(sessions):
            pc = ca if i % 2 else cb
            await pc.put_lease(
                info.session_id, "l", [api_rule(placeholder(), real_token())], ttl_s=120
            )
        short = sessions[0].session_id
        await ca.put_lease(short, "short", [api_rule(placeholder(), real_token())], ttl_s=1)
        assert await _scrape(a) == (60, 61)
        assert await _scrape(b) == (60, 61)

        # Revoked on one replica, gone from both; a deleted session takes its lease.
        await cb.delete_lease(sessions[1].session_id, "l")
        await ca.delete_session(sessions[2].session_id)
        assert await _scrape(a) == (59, 59)
        assert await _scrape(b) == (59, 59)

        # Expiry needs no replica to remove anything.
        async def expired() -> bool:
            return await _scrape(b) == (59, 58)

        await wait_until(expired, timeout=20, message="the 1 s lease stops counting")
        assert await _scrape(a) == (59, 58)

        # A scrape is a few commands, and never a key walk.
        before = await _commands(client)
        for proxy in (a, b):
            for _ in range(5):
                await _scrape(proxy)
        after = await _commands(client)
        delta = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
        walks = {k: n for k, n in delta.items() if k in ("scan", "keys", "sscan", "hscan")}
        assert walks == {}, delta
        spent = sum(n for k, n in delta.items() if k not in ("info", "ping"))
        assert spent <= 10 * 4 + 4, delta  # four commands a scrape (and a little slack)
    await client.aclose()
