"""Provider-backed credentials: the proxy mints GitHub App installation tokens itself.

Against the local fake GitHub App API (tests/fakes/github.py), which verifies
the app JWT (RS256 signature, iss, iat, exp) and records every mint. The
minter is tested in-process with an injectable clock (reuse, refresh five
minutes before expiry, classified failures); the proxy end to end: a lease
naming ``provider: "github_app"`` swaps a minted token the orchestrator never
sees, and a missing installation makes the PUT answer 424 before anything
is stored.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from airlock.client.leases import github_api_rule, github_app_replacement, github_placeholder
from airlock.client.proxy import ProxyError
from airlock.proxy.credentials import CredentialUnavailable, GitHubAppMinter
from tests.fakes.github import FakeGitHub
from tests.fakes.github_proxy import github_behind_proxy
from tests.proxy.helpers import curl

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]
REPO = "acme/widgets"


class Clock:
    def __init__(self) -> None:
        import time

        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def minter(gh: FakeGitHub, clock: Clock, key_pem: bytes | None = None) -> GitHubAppMinter:
    context = ssl.create_default_context(cafile=str(gh.ca_path))
    return GitHubAppMinter(
        str(gh.app_id),
        key_pem or gh.app_private_key_pem.encode(),
        gh.api_url,
        ssl_context=context,
        clock=clock,
    )


async def test_mint_reuse_and_refresh_near_expiry(tmp_path: Path) -> None:
    async with FakeGitHub(tmp_path / "gh", org="acme") as gh:
        await gh.create_repo(REPO)
        clock = Clock()
        m = minter(gh, clock)
        first = await m.token([REPO], {"contents": "write"})
        assert len(gh.mints) == 1 and gh.mints[0].via_jwt
        assert gh.mints[0].repositories == (REPO,)
        assert gh.mints[0].permissions == {"contents": "write"}
        assert await m.token([REPO], {"contents": "write"}) == first  # reused
        assert len(gh.mints) == 1
        other = await m.token([REPO], {"contents": "read"})  # another scope, another token
        assert other != first and len(gh.mints) == 2
        # Five minutes before expiry (the fake's tokens live an hour), a refresh.
        clock.now = gh.mints[0].expires_at - 301
        assert await m.token([REPO], {"contents": "write"}) == first
        clock.now = gh.mints[0].expires_at - 299
        refreshed = await m.token([REPO], {"contents": "write"})
        assert refreshed != first and len(gh.mints) == 3
        assert first not in repr(m) and gh.jwt_rejections == []


async def test_failures_are_classified(tmp_path: Path) -> None:
    async with FakeGitHub(tmp_path / "gh", org="acme") as gh:
        await gh.create_repo(REPO)
        clock = Clock()
        with pytest.raises(CredentialUnavailable) as info:
            await minter(gh, clock).token(["ghost/nothing"])
        assert info.value.reason == "installation_missing"
        stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = stranger.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        with pytest.raises(CredentialUnavailable) as info:
            await minter(gh, clock, pem).token([REPO])
        assert info.value.reason == "request_rejected"
        assert gh.jwt_rejections == ["bad signature"]
        with pytest.raises(CredentialUnavailable) as info:
            await minter(gh, clock).token([REPO], {"administration": "write"})
        assert info.value.reason == "request_rejected"  # a permission the app lacks: 422
        gh.fail_next("/app/installations/", 502)
        with pytest.raises(CredentialUnavailable) as info:
            await minter(gh, clock).token([REPO])
        assert info.value.reason == "request_failed"
        assert gh.mints == []


async def test_proxy_mints_swaps_and_answers_424(tmp_path: Path) -> None:
    async with github_behind_proxy(tmp_path, repos={REPO: None}, github_app=True) as w:
        ph = github_placeholder()
        rule = github_api_rule(
            github_app_replacement([REPO], {"contents": "read", "metadata": "read"}), ph
        )
        info = await w.pc.put_lease(w.session.session_id, "l1", [rule], ttl_s=300)
        assert len(w.gh.mints) == 1  # minted at PUT, before the lease went live
        minted = w.gh.mints[0].token
        assert minted not in info.model_dump_json()
        status, body, err = await curl(
            w.env(), "-H", f"Authorization: Bearer {ph}", f"https://api.github.com/repos/{REPO}"
        )
        assert status == 200, (body, err)
        assert json.loads(body)["full_name"] == REPO
        assert minted not in body
        assert len(w.gh.mints) == 1  # the swap reused the cached token
        assert w.gh.requests[-1].token == minted  # what GitHub received
        listed = await w.pc._request("GET", f"/v1/sessions/{w.session.session_id}/leases")
        assert minted not in json.dumps(listed)

        missing = github_api_rule(github_app_replacement(["ghost/nothing"]), github_placeholder())
        with pytest.raises(ProxyError) as failure:
            await w.pc.put_lease(w.session.session_id, "l2", [missing], ttl_s=300)
        assert failure.value.status == 424
        assert failure.value.code == "credential_unavailable"
        assert "installation_missing" in failure.value.message
        assert [lease.lease_id for lease in await w.pc.list_leases(w.session.session_id)] == ["l1"]
        for path in w.proxy.written_files():
            assert minted not in path.read_text(errors="replace"), path


async def test_minted_tokens_never_reach_redis(tmp_path: Path) -> None:
    """Plaintext Redis on purpose: a minted token stored anywhere would be visible."""
    from tests.fakes.redis_server import redis_server_sync

    with redis_server_sync() as redis:
        await _check_redis(tmp_path, redis.url, redis.port)


async def _check_redis(tmp_path: Path, url: str, port: int) -> None:
    from tests.fakes.redis_server import redis_contents

    async with github_behind_proxy(
        tmp_path,
        repos={REPO: None},
        github_app=True,
        store=url,
        proxy_args=["--store-plaintext"],
    ) as w:
        ph = github_placeholder()
        rule = github_api_rule(github_app_replacement([REPO]), ph)
        await w.pc.put_lease(w.session.session_id, "l1", [rule], ttl_s=300)
        status, _, err = await curl(
            w.env(), "-H", f"Authorization: Bearer {ph}", f"https://api.github.com/repos/{REPO}"
        )
        assert status == 200, err
        minted = w.gh.mints[-1].token
        values = redis_contents(port)
        assert any(ph.encode() in v for v in values)  # the lease is there, in clear
        assert all(minted.encode() not in v for v in values)
