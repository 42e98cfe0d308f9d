"""Events with the Redis store: one order for every replica, long polls wake across replicas."""

from __future__ import annotations

import asyncio
import json

import pytest

from airlock.client.leases import github_api_rule, github_placeholder
from airlock.client.proxy import ProxyError
from airlock.proxy.protocol import Allow
from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.redis_server import RedisServer
from tests.fakes.upstream import EchoUpstream
from tests.fakes.wait import wait_until
from tests.proxy.helpers import curl, real_token

pytestmark = pytest.mark.timeout(120)


async def test_replicas_share_one_ordered_event_stream(
    replicas: tuple[ProxyProcess, ProxyProcess], redis: RedisServer, github: EchoUpstream
) -> None:
    ph, real = github_placeholder(), real_token()
    a, b = replicas
    async with a.client() as ca, b.client() as cb:
        session = await ca.create_session(allow=["api.github.com"], ttl_s=60)
        sid = session.session_id
        start = (await cb.events_page(None)).next
        # A long poll on B wakes for a lease installed through A.
        waiting = asyncio.create_task(cb.events_page(sid, after=start, wait_s=10))
        rule = github_api_rule(real, ph, allow=Allow(methods=["GET"]))
        await ca.put_lease(sid, "l1", [rule], ttl_s=60)
        first = await asyncio.wait_for(waiting, 15)
        assert [e.type for e in first.events] == ["lease_installed"]
        # A refusal served by B, then the session deleted through A.
        status, _, _ = await curl(
            b.client_env(session), "-X", "POST", "-H", f"Authorization: Bearer {ph}",
            "https://api.github.com/x",
        )  # fmt: skip
        assert status == 403
        await ca.delete_session(sid)

        want = ["lease_installed", "lease_scope", "lease_removed", "session_closed"]

        async def complete() -> bool:  # the replicas append through a queue
            page = await ca.events_page(sid, after=start)
            return [e.type for e in page.events] == want

        await wait_until(complete, timeout=10, message="events never arrived in order")
        seen_a = await ca.events_page(sid, after=start)
        seen_b = await cb.events_page(sid, after=start)
        assert [e.type for e in seen_a.events] == want
        assert seen_a.model_dump() == seen_b.model_dump()  # one order for both replicas
        assert [e.seq for e in seen_a.events] == sorted(e.seq for e in seen_a.events)
        assert real not in json.dumps(seen_a.model_dump(mode="json"))
        assert ph not in json.dumps(seen_a.model_dump(mode="json"))
        # Redis gone: the long poll answers 503, never a traceback.
        await asyncio.to_thread(redis.stop)
        with pytest.raises(ProxyError) as failure:
            await ca.events_page(None, after=start)
        assert (failure.value.status, failure.value.code) == (503, "store_unavailable")
