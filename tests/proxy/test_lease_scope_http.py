"""Lease ``allow`` over real HTTPS through the real proxy: methods, paths, GraphQL, events.

A refused request gets 403 ``lease_scope`` from the proxy, the upstream never
sees it (its request log does not grow), nothing is swapped, and the refusal
is audited and published as an event. Events come in order, carry no secret,
and an exfiltration attempt revokes every lease of the session.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from airlock.client.leases import github_api_rule, github_placeholder, vercel_placeholder
from airlock.client.proxy import ProxyClient, ProxyError
from airlock.proxy.protocol import Allow, Event, GraphQLAllow, SessionInfo
from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.upstream import EchoUpstream
from tests.fakes.wait import wait_until
from tests.proxy.conftest import ProxyFactory
from tests.proxy.helpers import curl, real_token

pytestmark = pytest.mark.timeout(120)
ALLOW = ["api.github.com", "github.com", "api.vercel.com"]
READ_ONLY = Allow(methods=["GET", "HEAD"], graphql=GraphQLAllow(operations=["query"]))
REPO = Allow(
    paths=["/repos/acme/widgets/**"], graphql=GraphQLAllow(operations=["query", "mutation"])
)


@pytest.fixture(scope="module")
def proxy(start_proxy: ProxyFactory) -> Iterator[ProxyProcess]:
    with start_proxy("scope") as p:
        yield p


class Box:
    def __init__(self, proxy: ProxyProcess, client: ProxyClient, session: SessionInfo) -> None:
        self.proxy = proxy
        self.client = client
        self.session = session
        self.env = proxy.client_env(session)
        self.sid = session.session_id


@pytest.fixture
async def box(proxy: ProxyProcess) -> AsyncIterator[Box]:
    async with proxy.client() as client:
        session = await client.create_session(allow=ALLOW, ttl_s=600)
        yield Box(proxy, client, session)
        await client.delete_session(session.session_id)


async def leased(box: Box, allow: Allow) -> tuple[str, str]:
    ph, real = github_placeholder(), real_token()
    await box.client.put_lease(box.sid, "l1", [github_api_rule(real, ph, allow=allow)], ttl_s=120)
    return ph, real


async def call(
    box: Box, ph: str, method: str, path: str, body: bytes | None = None, tmp: Path | None = None
) -> tuple[int, str]:
    args = ["--path-as-is", "-X", method, "-H", f"Authorization: Bearer {ph}"]
    if body is not None:
        assert tmp is not None
        tmp.write_bytes(body)
        args += ["-H", "content-type: application/json", "--data-binary", f"@{tmp}"]
    status, text, err = await curl(box.env, *args, f"https://api.github.com{path}")
    assert status, err
    return status, text


def assert_scope_refusal(status: int, text: str, *needles: str) -> None:
    assert status == 403, text
    error = json.loads(text)["error"]
    assert error["code"] == "lease_scope"
    assert "api.github.com" in error["message"]
    for needle in needles:
        assert needle in error["message"], error


async def test_methods_and_graphql_of_a_read_only_rule(
    box: Box, github: EchoUpstream, tmp_path: Path
) -> None:
    ph, real = await leased(box, READ_ONLY)
    status, _ = await call(box, ph, "GET", "/repos/acme/widgets/pulls")
    assert status == 200 and github.last().one("authorization") == f"Bearer {real}"
    seen = len(github.requests)
    status, text = await call(box, ph, "DELETE", "/repos/acme/widgets")
    assert_scope_refusal(status, text, "DELETE")
    gql = tmp_path / "q.json"
    query = json.dumps({"query": "query V { viewer { login } }"}).encode()
    status, _ = await call(box, ph, "POST", "/graphql", query, gql)
    assert status == 200 and github.last().one("authorization") == f"Bearer {real}"
    seen = len(github.requests)
    cases = [
        (json.dumps({"query": "mutation M { x }"}).encode(), "mutation M"),
        (json.dumps({"query": "query A { a } mutation { b }"}).encode(), "anonymous mutation"),
        (json.dumps([{"query": "{ a }"}, {"query": "mutation B { b }"}]).encode(), "mutation B"),
        (b"{not json", "not JSON"),
        (json.dumps({"query": "query {"}).encode(), "does not parse"),
        (json.dumps({"query": "{ a }", "pad": "x" * (1 << 20)}).encode(), "over"),
    ]
    for body, needle in cases:
        status, text = await call(box, ph, "POST", "/graphql", body, gql)
        assert_scope_refusal(status, text, needle)
    assert len(github.requests) == seen  # nothing refused reached the upstream
    assert real not in box.proxy.audit_log.read_text()


async def test_paths_and_path_tricks(box: Box, github: EchoUpstream) -> None:
    ph, real = await leased(box, REPO)
    status, _ = await call(box, ph, "POST", "/repos/acme/widgets/pulls")
    assert status == 200 and github.last().one("authorization") == f"Bearer {real}"
    status, _ = await call(box, ph, "GET", "/repos/acme/widgets")
    assert status == 200
    seen = len(github.requests)
    for path in [
        "/repos/acme/other",
        "/repos/acme/widgets%2F..%2Fother",
        "/repos/acme/widgets/%2e%2e/%2e%2e/acme/other",
        "/repos/acme/widgets/../other",
        "/repos/acme/other/../widgets/pulls",
        "/repos//acme/widgets",
        "/repos/acme/widgets\\..\\other",
        "/repos/acme/widgets/%00",
    ]:
        status, text = await call(box, ph, "GET", path)
        assert_scope_refusal(status, text)
    assert len(github.requests) == seen


async def test_leases_show_allow_never_a_token(box: Box) -> None:
    ph, real = await leased(box, REPO)
    leases = await box.client.list_leases(box.sid)
    assert leases[0].rules[0].host == "api.github.com"
    assert leases[0].rules[0].header == "authorization"
    assert leases[0].rules[0].allow == REPO
    raw = await box.client._request("GET", f"/v1/sessions/{box.sid}/leases")
    assert real not in json.dumps(raw) and ph not in json.dumps(raw)


async def test_events_in_order_without_secrets_and_auto_revoke(box: Box) -> None:
    start = (await box.client.events_page(None)).next
    got: list[Event] = []

    async def collect() -> None:
        async for event in box.client.events(box.sid, after=start, wait_s=5):
            got.append(event)

    reader = asyncio.create_task(collect())
    try:
        ph, real = await leased(box, READ_ONLY)
        status, _ = await call(box, ph, "DELETE", "/repos/acme/widgets")
        assert status == 403
        # The placeholder sent to a host its lease does not cover: exfiltration.
        status, text, _ = await curl(
            box.env, "-H", f"Authorization: Bearer {ph}", "https://api.vercel.com/v2/user"
        )
        assert status == 403 and "exfiltration" in text
        await wait_until(lambda: len(got) >= 4, timeout=10, message=f"events: {got}")
    finally:
        reader.cancel()
    types = [e.type for e in got]
    assert types[:4] == ["lease_installed", "lease_scope", "exfiltration_attempt", "lease_removed"]
    assert [e.seq for e in got] == sorted(e.seq for e in got)
    assert got[3].model_extra and got[3].model_extra.get("cause") == "exfiltration"
    dumped = json.dumps([e.model_dump(mode="json") for e in got])
    assert real not in dumped and ph not in dumped
    assert await box.client.list_leases(box.sid) == []  # revoked at once
    # A fresh session sees session_closed in the cross-session stream.
    other = await box.client.create_session(allow=ALLOW, ttl_s=60)
    mark = (await box.client.events_page(None)).next
    await box.client.delete_session(other.session_id)
    page = await box.client.events_page(None, after=mark, wait_s=5)
    assert [e.type for e in page.events if e.session == other.session_id] == ["session_closed"]


async def test_event_queries_are_validated(box: Box) -> None:
    for query in ["after=x", "wait_s=-1", "wait_s=61", "wait_s=nan"]:
        with pytest.raises(ProxyError) as info:
            await box.client._request("GET", f"/v1/events?{query}")
        assert (info.value.status, info.value.code) == (400, "invalid_request")


def test_placeholders_are_shaped_like_the_credential() -> None:
    gh = github_placeholder()
    assert gh.startswith("ghs_") and len(gh) == 40 and gh[4:].isalnum()
    vc = vercel_placeholder()
    assert len(vc) == 24 and vc.isalnum()
    assert github_placeholder() != gh
