"""The exported lease-rule builders make rules a real airlock-proxy's control API accepts."""

from __future__ import annotations

from pathlib import Path

from airlock.client import git_basic_rule, github_api_rule, github_rules, vercel_rules
from tests.fakes.proxy_harness import running_proxy


async def test_each_builder_is_accepted_by_a_real_proxy(tmp_path: Path) -> None:
    api = github_api_rule("ghs_real_token_1", "airlock-placeholder-1")
    git = git_basic_rule("ghs_real_token_1", "airlock-placeholder-3")
    vercel = vercel_rules("vercel_real_token", "airlock-placeholder-2")
    assert api.schemes == ["token", "bearer"] and api.replace.scheme == "bearer"
    assert git.schemes == ["basic"] and git.replace.username == "x-access-token"
    assert [r.host for r in github_rules("t" * 10, "p" * 10)] == ["api.github.com", "github.com"]
    async with running_proxy(tmp_path, allow=["api.github.com"]) as proxy, proxy.client() as pc:
        session = await pc.create_session(allow=["api.github.com", "github.com", "vercel.com"])
        for lease_id, rules in (("api", [api]), ("git", [git]), ("vercel", vercel)):
            info = await pc.put_lease(session.session_id, lease_id, rules, ttl_s=60)
            assert info.lease_id == lease_id
            assert sorted(info.hosts) == sorted({r.host for r in rules})
        listed = await pc.list_leases(session.session_id)
        assert {lease.lease_id for lease in listed} == {"api", "git", "vercel"}
