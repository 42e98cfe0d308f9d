"""Credential providers against the local GitHub: JWT, scoping, caching, classification."""

from __future__ import annotations

import sys
import time

import pytest

from airlock.client.providers import (
    CommandTokenProvider,
    GitHubAppProvider,
    InstallationRequiredError,
    StaticTokenProvider,
    TokenRequestFailedError,
    TokenRequestRejectedError,
)
from airlock.client.providers.jwt import app_jwt, b64url_decode, load_private_key
from tests.fakes.github import FakeGitHub
from tests.fakes.procs import LINGER_ARGV


def _provider(gh: FakeGitHub, **kw: object) -> GitHubAppProvider:
    options: dict[str, object] = {"org": "acme", "api_url": gh.api_url} | kw
    return GitHubAppProvider(
        gh.app_id,
        gh.app_private_key_pem,
        ssl_context=gh.ca.client_context(),
        **options,  # type: ignore[arg-type]
    )


def test_app_jwt_claims() -> None:
    import json

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    token = app_jwt(123, load_private_key(pem), clock=lambda: 1_000_000)
    header, payload, _sig = token.split(".")
    assert json.loads(b64url_decode(header)) == {"alg": "RS256", "typ": "JWT"}
    claims = json.loads(b64url_decode(payload))
    assert claims["iss"] == "123"
    assert claims["iat"] == 1_000_000 - 60
    assert 1_000_000 < claims["exp"] <= 1_000_000 + 600


async def test_mint_scoped_to_one_repository(fake_github: FakeGitHub) -> None:
    await fake_github.create_repo("acme/gadgets")
    provider = _provider(fake_github)
    issued = await provider.get_token(["acme/widgets"], {"contents": "write"})
    assert issued.token not in repr(issued) and issued.token not in str(issued)
    assert len(fake_github.mints) == 1
    mint = fake_github.mints[0]
    assert mint.token == issued.token
    assert mint.repositories == ("acme/widgets",)
    assert mint.permissions == {"contents": "write"}
    assert mint.installation_id == fake_github.installation_id("acme")
    assert issued.expires_at is not None and issued.expires_at.timestamp() > time.time() + 3000
    assert len(issued.token) != 40


async def test_cache_mints_once_then_remints_when_expiring(fake_github: FakeGitHub) -> None:
    now = [time.time()]
    provider = _provider(fake_github, clock=lambda: now[0])
    first = await provider.get_token(["acme/widgets"])
    second = await provider.get_token(["acme/widgets"])
    assert first.token == second.token
    assert len(fake_github.mints) == 1
    # A different scope is a different token.
    await provider.get_token(["acme/widgets"], {"contents": "read"})
    assert len(fake_github.mints) == 2
    # 56 minutes later the one-hour token is inside the 5-minute margin: re-mint.
    now[0] += 56 * 60
    third = await provider.get_token(["acme/widgets"])
    assert third.token != first.token
    assert len(fake_github.mints) == 3


async def test_short_lived_token_is_reminted(tmp_path: object, fake_github: FakeGitHub) -> None:
    fake_github.token_ttl_s = 120  # shorter than the refresh margin: never reusable
    provider = _provider(fake_github)
    a = await provider.get_token(["acme/widgets"])
    b = await provider.get_token(["acme/widgets"])
    assert a.token != b.token
    assert len(fake_github.mints) == 2


async def test_concurrent_requests_share_one_mint(fake_github: FakeGitHub) -> None:
    import asyncio

    provider = _provider(fake_github)
    tokens = await asyncio.gather(*(provider.get_token(["acme/widgets"]) for _ in range(5)))
    assert len({t.token for t in tokens}) == 1
    assert len(fake_github.mints) == 1


async def test_installation_by_id_skips_lookup(fake_github: FakeGitHub) -> None:
    provider = GitHubAppProvider(
        fake_github.app_id,
        fake_github.app_private_key_pem,
        installation_id=fake_github.installation_id("acme"),
        api_url=fake_github.api_url,
        ssl_context=fake_github.ca.client_context(),
    )
    await provider.get_token(["acme/widgets"])
    paths = [r.path for r in fake_github.requests]
    assert not any(p.startswith("/orgs/") for p in paths)
    assert len(fake_github.mints) == 1


async def test_enterprise_api_url(fake_github: FakeGitHub) -> None:
    provider = _provider(fake_github, api_url=fake_github.api_url + "/api/v3")
    issued = await provider.get_token(["acme/widgets"])
    assert issued.token == fake_github.mints[0].token
    assert fake_github.requests[-1].path.startswith("/api/v3/app/installations/")


async def test_missing_installation_is_classified(fake_github: FakeGitHub) -> None:
    provider = _provider(fake_github, org="nobody")
    with pytest.raises(InstallationRequiredError, match="app installation is required"):
        await provider.get_token(["nobody/x"])
    assert fake_github.mints == []


async def test_wrong_key_is_rejected_without_leaking(fake_github: FakeGitHub) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = other.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    provider = GitHubAppProvider(
        fake_github.app_id,
        pem,
        org="acme",
        api_url=fake_github.api_url,
        ssl_context=fake_github.ca.client_context(),
    )
    with pytest.raises(TokenRequestRejectedError) as info:
        await provider.get_token(["acme/widgets"])
    assert info.value.status == 401
    assert "bad signature" in fake_github.jwt_rejections
    assert fake_github.mints == []


async def test_unknown_repository_and_permission_rejected(fake_github: FakeGitHub) -> None:
    provider = _provider(fake_github)
    with pytest.raises(TokenRequestRejectedError) as info:
        await provider.get_token(["acme/does-not-exist"])
    assert info.value.status == 422
    with pytest.raises(TokenRequestRejectedError):
        await provider.get_token(["acme/widgets"], {"administration": "write"})
    assert fake_github.mints == []


async def test_repository_of_another_owner_is_refused_before_any_request(
    fake_github: FakeGitHub,
) -> None:
    provider = _provider(fake_github)
    with pytest.raises(TokenRequestRejectedError, match="not in acme"):
        await provider.get_token(["evil/widgets"])
    assert fake_github.requests == [] and fake_github.mints == []


async def test_server_errors_and_network_failures_are_failed(fake_github: FakeGitHub) -> None:
    provider = _provider(fake_github, installation_id=fake_github.installation_id("acme"))
    fake_github.fail_next("/app/installations/", 502)
    with pytest.raises(TokenRequestFailedError) as info:
        await provider.get_token(["acme/widgets"])
    assert info.value.status == 502
    dead = GitHubAppProvider(
        1, fake_github.app_private_key_pem, installation_id=1, api_url="https://127.0.0.1:9"
    )
    with pytest.raises(TokenRequestFailedError) as info2:
        await dead.get_token(["acme/widgets"])
    assert info2.value.cause is not None and info2.value.__cause__ is info2.value.cause


async def test_static_provider() -> None:
    provider = StaticTokenProvider("  abc-123  ")
    issued = await provider.get_token(["o/r"])
    assert issued.token == "abc-123"
    assert "abc-123" not in repr(provider)
    with pytest.raises(TokenRequestRejectedError):
        StaticTokenProvider("   ")


async def test_command_provider_reads_stdout() -> None:
    provider = CommandTokenProvider([sys.executable, "-c", "print('tok-xyz-1')"])
    assert (await provider.get_token()).token == "tok-xyz-1"
    as_text = CommandTokenProvider(f"{sys.executable} -c \"print('tok-xyz-2')\"", cache_s=60)
    first = await as_text.get_token()
    assert first.token == "tok-xyz-2" and first.expires_at is not None
    assert (await as_text.get_token()).token == "tok-xyz-2"


async def test_command_provider_failures_never_echo_stdout() -> None:
    failing = CommandTokenProvider(
        [sys.executable, "-c", "import sys; print('secret-out'); sys.exit('not logged in')"]
    )
    with pytest.raises(TokenRequestRejectedError) as info:
        await failing.get_token()
    assert "secret-out" not in str(info.value)
    assert "not logged in" in str(info.value)
    missing = CommandTokenProvider(["/nonexistent/token-tool"])
    with pytest.raises(TokenRequestFailedError):
        await missing.get_token()
    slow = CommandTokenProvider(list(LINGER_ARGV), timeout_s=0.3)
    with pytest.raises(TokenRequestFailedError, match="timed out"):
        await slow.get_token()
    empty = CommandTokenProvider([sys.executable, "-c", "print()"])
    with pytest.raises(TokenRequestRejectedError):
        await empty.get_token()
