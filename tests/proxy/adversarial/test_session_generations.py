"""Attack: keep a tunnel open, have the session deleted and its id re-created.

Issue items 3 and 11: the old tenant's tunnel must die with the DELETE
(intercepted and passthrough), and must never swap the new session's
placeholder. With two replicas on one Redis the replica that did not serve the
DELETE closes the tunnel too (its reaper).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airlock.proxy.protocol import SessionInfo
from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.redis_server import RedisServer
from tests.fakes.tls import TestCA
from tests.fakes.upstream import EchoUpstream
from tests.fakes.wait import wait_until_sync
from tests.proxy.adversarial.ops_fixtures import OpsProxy, Seen, Tunnel, leased_session, placeholder

pytestmark = pytest.mark.timeout(180)

SEEN = Seen()


@pytest.fixture(scope="module")
def proxy(ops_proxy: OpsProxy) -> Iterator[ProxyProcess]:
    with ops_proxy("generations") as p:
        yield p


async def _session(proxy: ProxyProcess, sid: str, ph: str) -> tuple[SessionInfo, str]:
    info, _, token = await leased_session(
        proxy,
        SEEN,
        allow=["api.github.com", "other.test"],
        ttl_s=120,
        session_id=sid,
        ph=ph,
        lease_id="l1",
    )
    return info, token


async def test_recreated_session_id_never_revives_an_intercepted_tunnel(
    proxy: ProxyProcess, ops_github: EchoUpstream
) -> None:
    ph = placeholder()
    old, old_token = await _session(proxy, "tenant-a", ph)
    tunnel = Tunnel(proxy, old, "api.github.com", proxy.ca_path, SEEN)
    tunnel.open()
    status, body = tunnel.get("/before", {"authorization": f"token {ph}"})
    assert status == 200 and ph.encode() in body
    assert ops_github.last().one("authorization") == f"Bearer {old_token}"

    async with proxy.client() as client:
        await client.delete_session("tenant-a")
    # The DELETE closes the tunnel at once.
    wait_until_sync(
        tunnel.is_closed_by_peer, message="timed out waiting for old tunnel closed by the DELETE"
    )

    # Another tenant gets the same id and the same placeholder string.
    ops_github.clear()
    _, new_token = await _session(proxy, "tenant-a", ph)
    with pytest.raises((OSError, ConnectionError)):
        tunnel.get("/after", {"authorization": f"token {ph}"})
    assert all(f"Bearer {new_token}" not in r.all("authorization") for r in ops_github.requests)
    assert all(r.path != "/after" for r in ops_github.requests)
    tunnel.close()
    events = await proxy.await_audit(
        lambda e: e["event"] == "session_deleted", what="session_deleted"
    )
    deleted = [e for e in events if e["event"] == "session_deleted"]
    assert deleted and deleted[0]["connections_closed"] >= 1


async def test_deleted_session_closes_its_passthrough_tunnel(
    proxy: ProxyProcess, ops_ca: TestCA
) -> None:
    old, _ = await _session(proxy, "tenant-b", placeholder())
    tunnel = Tunnel(proxy, old, "other.test", ops_ca.ca_path, SEEN)
    tunnel.open()
    status, _ = tunnel.get("/through")
    assert status == 200
    async with proxy.client() as client:
        await client.delete_session("tenant-b")
    wait_until_sync(
        tunnel.is_closed_by_peer,
        message="timed out waiting for passthrough tunnel closed by the DELETE",
    )
    await _session(proxy, "tenant-b", placeholder())
    with pytest.raises((OSError, ConnectionError)):
        tunnel.get("/after")
    tunnel.close()


async def test_delete_on_one_replica_closes_tunnels_on_another(
    ops_proxy: OpsProxy, ops_ca: TestCA, redis: RedisServer
) -> None:
    with ops_proxy("replica-a", store=redis.url) as a, ops_proxy("replica-b", store=redis.url) as b:
        ph = placeholder()
        info, _ = await _session(a, "tenant-c", ph)
        intercepted = Tunnel(b, info, "api.github.com", b.ca_path, SEEN)
        passthrough = Tunnel(b, info, "other.test", ops_ca.ca_path, SEEN)
        intercepted.open()
        passthrough.open()
        assert intercepted.get("/x", {"authorization": f"token {ph}"})[0] == 200
        assert passthrough.get("/y")[0] == 200
        async with a.client() as client:
            await client.delete_session("tenant-c")
        wait_until_sync(
            intercepted.is_closed_by_peer,
            message="timed out waiting for replica b closed the intercepted tunnel",
        )
        wait_until_sync(
            passthrough.is_closed_by_peer,
            message="timed out waiting for replica b closed the passthrough tunnel",
        )
        intercepted.close()
        passthrough.close()
        SEEN.assert_clean([*a.written_files(), *b.written_files()])


def test_zz_no_real_token_anywhere(proxy: ProxyProcess) -> None:
    assert len(SEEN.tokens) >= 4
    SEEN.assert_clean(proxy.written_files())
