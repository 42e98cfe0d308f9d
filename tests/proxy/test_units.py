"""Pure units of the proxy: candidate parsing, the chain (the scrubber: tests/proxy/addons)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from mitmproxy import connection, http
from mitmproxy.proxy.server_hooks import ServerConnectionHookData

from airlock.proxy.addons.chain import Chain
from airlock.proxy.addons.policy import EgressPolicy
from airlock.proxy.addons.swap import candidates
from airlock.proxy.config import ConfigError, parse_intercept
from tests.fakes.wait import yield_to_loop
from tests.proxy.helpers import unit_context


def test_candidates_extract_only_whole_credential_forms() -> None:
    headers = http.Headers(
        [
            (b"Authorization", b"token ph-aaaaaaaa"),
            (b"X-Other", b"Bearer ph-bbbbbbbb"),
            (b"X-Basic", b"Basic eC1hY2Nlc3MtdG9rZW46cGgtY2NjY2NjY2M="),
            (b"X-Not", b"Bearer a b"),
            (b"X-Bad-B64", b"Basic !!!"),
            (b"X-No-Colon", b"Basic cGgtY2NjY2NjY2M="),
        ]
    )
    found = {(c.header, c.scheme, c.placeholder) for c in candidates(headers)}
    assert found == {
        ("authorization", "token", "ph-aaaaaaaa"),
        ("x-other", "bearer", "ph-bbbbbbbb"),
        ("x-basic", "basic", "ph-cccccccc"),
    }


def test_chain_calls_concerns_in_order_sync_and_async() -> None:
    calls: list[str] = []

    class A:
        def requestheaders(self, flow: object) -> None:
            calls.append("a")

    class B:
        async def requestheaders(self, flow: object) -> None:
            await yield_to_loop()  # the point: a hook that really suspends
            calls.append("b")

        def response(self, flow: object) -> None:
            calls.append("b-response")

    chain = Chain([A(), B()])
    asyncio.run(chain.requestheaders(None))  # type: ignore[attr-defined]
    chain.response(None)  # type: ignore[attr-defined]
    assert calls == ["a", "b", "b-response"]
    assert not hasattr(chain, "http_connect")


def test_server_connect_dials_only_the_pinned_address(tmp_path: Path) -> None:
    """The DNS-rebinding guard: the socket goes to the address the policy checked,
    re-dials reuse it, and the connection keeps the host name for TLS."""
    ctx = unit_context(tmp_path)
    policy = EgressPolicy(ctx)
    client = connection.Client(peername=("127.0.0.1", 5000), sockname=("127.0.0.1", 8080))
    ctx.connections.state(client.id).pins[("api.github.com", 443)] = ("140.82.112.6", 443)

    for _ in range(2):  # first dial and a re-dial after the upstream closed
        server = connection.Server(address=("api.github.com", 443))
        data = ServerConnectionHookData(server=server, client=client)
        policy.server_connect(data)
        assert server.error is None
        assert server.address == ("140.82.112.6", 443)
        server.state = connection.ConnectionState.OPEN
        policy.server_connected(data)
        assert server.address == ("api.github.com", 443)

    # A destination nobody decided on (e.g. a rebound name) is never dialled.
    rogue = connection.Server(address=("evil.example", 443))
    policy.server_connect(ServerConnectionHookData(server=rogue, client=client))
    assert rogue.error is not None
    other_client = connection.Client(peername=("127.0.0.1", 5001), sockname=("127.0.0.1", 8080))
    foreign = connection.Server(address=("api.github.com", 443))
    policy.server_connect(ServerConnectionHookData(server=foreign, client=other_client))
    assert foreign.error is not None
    ctx.audit.close()


def test_intercept_set_rejects_ip_literals() -> None:
    with pytest.raises(ConfigError):
        parse_intercept(["127.0.0.1"])
    assert parse_intercept(None) == frozenset(
        {"github.com", "api.github.com", "vercel.com", "api.vercel.com"}
    )
