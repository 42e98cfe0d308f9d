"""Swap's lease-scope outcomes, in process: refused, gated, swapped, revoked, unmintable."""

from __future__ import annotations

import asyncio
import json

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mitmproxy import http

from airlock.proxy.addons.swap import Swap
from airlock.proxy.context import ProxyContext
from airlock.proxy.credentials import Credentials, GitHubAppMinter
from airlock.proxy.mitm import BODY_GATE
from airlock.proxy.protocol import Allow, GraphQLAllow, LeaseRule, Replacement
from airlock.proxy.store.base import LeaseRecord, SessionRecord, hash_secret, now
from tests.fakes.net import free_port
from tests.proxy.addons.conftest import PLACEHOLDER, REAL, intercepted_flow

ALLOW = Allow(methods=["GET"], graphql=GraphQLAllow(operations=["query"]))


def lease(ctx: ProxyContext, allow: Allow | None, replace: Replacement | None = None) -> None:
    rule = LeaseRule(
        host="api.github.com",
        placeholder=PLACEHOLDER,
        schemes=["bearer"],
        replace=replace or Replacement(scheme="bearer", token=REAL),
        allow=allow,
    )

    async def put() -> None:
        await ctx.store.create_session(SessionRecord("s1", hash_secret("x"), (), now() + 600))
        await ctx.store.put_lease(LeaseRecord("s1", "l1", (rule,), now() + 600))

    asyncio.run(put())


def flow_for(ctx: ProxyContext, method: str, path: str) -> http.HTTPFlow:
    flow = intercepted_flow(ctx, swapped=False)
    flow.response = None
    flow.request.method = method
    flow.request.path = path
    flow.request.headers["authorization"] = f"Bearer {PLACEHOLDER}"
    return flow


def error_code(flow: http.HTTPFlow) -> str:
    assert flow.response is not None
    return str(json.loads(flow.response.content or b"")["error"]["code"])


def test_outside_the_scope_is_refused_unswapped(ctx: ProxyContext) -> None:
    lease(ctx, ALLOW)
    flow = flow_for(ctx, "DELETE", "/repos/o/r")
    asyncio.run(Swap(ctx).requestheaders(flow))
    assert flow.response is not None and flow.response.status_code == 403
    assert error_code(flow) == "lease_scope"
    assert flow.request.headers["authorization"] == f"Bearer {PLACEHOLDER}"


def test_inside_the_scope_is_swapped(ctx: ProxyContext) -> None:
    lease(ctx, ALLOW)
    flow = flow_for(ctx, "GET", "/repos/o/r")
    asyncio.run(Swap(ctx).requestheaders(flow))
    assert flow.response is None
    assert flow.request.headers["authorization"] == f"Bearer {REAL}"


def test_graphql_is_held_until_the_body_decides(ctx: ProxyContext) -> None:
    lease(ctx, ALLOW)
    swap = Swap(ctx)
    allowed = flow_for(ctx, "POST", "/graphql")
    allowed.request.headers["content-length"] = "64"
    asyncio.run(swap.requestheaders(allowed))
    # A small declared body is read whole by mitmproxy: decided in ``request``.
    assert not allowed.request.stream and BODY_GATE in allowed.metadata
    assert allowed.request.headers["authorization"] == f"Bearer {PLACEHOLDER}"  # not yet
    allowed.request.content = json.dumps({"query": "{ viewer { login } }"}).encode()
    swap.request(allowed)  # mitmproxy read the (small) body whole
    assert allowed.response is None
    assert allowed.request.headers["authorization"] == f"Bearer {REAL}"

    refused = flow_for(ctx, "POST", "/graphql")
    del refused.request.headers["content-length"]
    refused.request.headers["transfer-encoding"] = "chunked"
    asyncio.run(swap.requestheaders(refused))
    assert refused.request.stream  # held and fed in steps (airlock.proxy.mitm)
    gate = refused.metadata.pop(BODY_GATE)
    body = json.dumps({"query": "mutation { x }"}).encode()
    assert gate(body[:5], False) is None
    assert gate(body[5:], True) is False
    assert error_code(refused) == "lease_scope"
    assert refused.request.headers["authorization"] == f"Bearer {PLACEHOLDER}"


def test_exfiltration_revokes_the_sessions_leases(ctx: ProxyContext) -> None:
    lease(ctx, None)
    flow = intercepted_flow(ctx, host="api.vercel.com", swapped=False)
    flow.response = None
    flow.request.headers["authorization"] = f"Bearer {PLACEHOLDER}"
    asyncio.run(Swap(ctx).requestheaders(flow))
    assert error_code(flow) == "exfiltration_wrong_host"
    assert asyncio.run(ctx.store.list_leases("s1")) == []


def test_refuse_only_keeps_the_leases(ctx: ProxyContext) -> None:
    import dataclasses

    lease(ctx, None)
    ctx.config = dataclasses.replace(ctx.config, on_exfiltration="refuse")
    flow = intercepted_flow(ctx, host="api.vercel.com", swapped=False)
    flow.response = None
    flow.request.headers["authorization"] = f"Bearer {PLACEHOLDER}"
    asyncio.run(Swap(ctx).requestheaders(flow))
    assert error_code(flow) == "exfiltration_wrong_host"
    assert [x.lease_id for x in asyncio.run(ctx.store.list_leases("s1"))] == ["l1"]


def _unreachable_app() -> Credentials:
    """A real minter whose GitHub API does not answer (nothing listens on the port)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return Credentials(GitHubAppMinter("1", pem, f"https://127.0.0.1:{free_port()}"))


def test_an_unmintable_credential_is_refused(ctx: ProxyContext) -> None:
    lease(
        ctx,
        None,
        Replacement(scheme="bearer", provider="github_app", repositories=["o/r"]),
    )
    ctx.credentials = _unreachable_app()
    flow = flow_for(ctx, "GET", "/repos/o/r")
    asyncio.run(Swap(ctx).requestheaders(flow))
    assert flow.response is not None and flow.response.status_code == 502
    assert error_code(flow) == "credential_unavailable"
    assert flow.request.headers["authorization"] == f"Bearer {PLACEHOLDER}"
