"""Provider-backed credentials: the proxy mints what a lease names, and keeps it to itself.

A rule whose ``replace`` names ``provider: "github_app"`` carries no token. The
proxy, started with ``--github-app-id`` and ``--github-app-key-file``, signs an
app JWT (RS256), finds the installation from the repository's owner
(``GET /repos/{owner}/{repo}/installation``) and mints an installation token
narrowed to the rule's ``repositories`` and ``permissions``
(``POST /app/installations/{id}/access_tokens``).

Tokens are cached per (installation, repositories, permissions) until five
minutes before they expire, so a long lease is refreshed on the next request
after that point, and concurrent requests share one mint. They live only in
this process's memory: never in the store (Redis), a response, an audit line
or a log. Another replica that serves the same lease mints its own.

Failures are classified (:class:`CredentialUnavailable` ``reason``):
``installation_missing`` (404: the app is not installed for that owner, or
cannot see the repository), ``request_rejected`` (401/403/422: the key, a
repository or a permission was refused) and ``request_failed`` (network,
5xx, an unreadable answer). Messages carry status codes and GitHub's
``message`` only, never a token.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from airlock.client.providers.github_api import app_headers, json_object
from airlock.client.providers.jwt import load_private_key

from .protocol import Replacement

__all__ = ["REFRESH_MARGIN_S", "CredentialUnavailable", "Credentials", "GitHubAppMinter"]

REFRESH_MARGIN_S = 300.0
Reason = Literal["installation_missing", "request_rejected", "request_failed", "not_configured"]


class CredentialUnavailable(Exception):
    """The credential cannot be had; ``reason`` classifies why."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


@dataclass
class _Minted:
    token: str
    expires_at: float

    def __repr__(self) -> str:  # never the token
        return f"_Minted(expires_at={self.expires_at})"


_Key = tuple[int, tuple[str, ...], tuple[tuple[str, str], ...]]


class GitHubAppMinter:
    """Installation tokens for one GitHub App, cached per scope in memory."""

    def __init__(
        self,
        app_id: str,
        private_key_pem: bytes,
        api_url: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        clock: Callable[[], float] = time.time,
        refresh_margin_s: float = REFRESH_MARGIN_S,
        timeout_s: float = 20.0,
    ) -> None:
        self.app_id = app_id
        self._key = load_private_key(private_key_pem)
        self.api_url = api_url.rstrip("/")
        self._ssl = ssl_context
        self._clock = clock
        self._margin = refresh_margin_s
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._installations: dict[str, int] = {}
        self._cache: dict[_Key, _Minted] = {}
        self._locks: dict[_Key, asyncio.Lock] = {}
        self.mints = 0

    def __repr__(self) -> str:
        return f"GitHubAppMinter(app_id={self.app_id!r}, api_url={self.api_url!r})"

    async def token(
        self, repositories: Sequence[str], permissions: Mapping[str, str] | None = None
    ) -> str:
        """A live token for exactly ``repositories`` (one owner) and ``permissions``."""
        owner, first = repositories[0].split("/", 1)[0], repositories[0]
        inst = await self._installation(owner.lower(), first)
        names = tuple(sorted({r.split("/", 1)[1].lower() for r in repositories}))
        perms = tuple(sorted((permissions or {}).items()))
        key: _Key = (inst, names, perms)
        cached = self._cache.get(key)
        if cached is not None and self._fresh(cached):
            return cached.token
        async with self._locks.setdefault(key, asyncio.Lock()):
            cached = self._cache.get(key)
            if cached is not None and self._fresh(cached):
                return cached.token
            minted = await self._mint(inst, owner, names, dict(perms))
            self._cache[key] = minted
            return minted.token

    def _fresh(self, minted: _Minted) -> bool:
        return minted.expires_at - self._margin > self._clock()

    def _headers(self) -> dict[str, str]:
        return app_headers(self.app_id, self._key, "airlock-proxy")

    async def _call(
        self, method: str, path: str, payload: dict[str, Any] | None
    ) -> tuple[int, dict[str, Any]]:
        try:
            async with (
                aiohttp.ClientSession(timeout=self._timeout) as http,
                http.request(
                    method,
                    self.api_url + path,
                    json=payload,
                    headers=self._headers(),
                    ssl=self._ssl or True,
                ) as resp,
            ):
                return resp.status, await json_object(resp)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise CredentialUnavailable(
                "request_failed", f"{method} {path} failed: {type(exc).__name__}"
            ) from None

    @staticmethod
    def _classify(status: int, body: Mapping[str, Any], what: str) -> CredentialUnavailable:
        message = str(body.get("message", ""))[:200]
        text = f"{what} answered HTTP {status}" + (f" ({message})" if message else "")
        if status == 404:
            return CredentialUnavailable(
                "installation_missing",
                f"{text}: install the GitHub App on the repository's owner",
            )
        if status in (401, 403, 422):
            return CredentialUnavailable("request_rejected", text)
        return CredentialUnavailable("request_failed", text + "; retry later")

    async def _installation(self, owner: str, repo: str) -> int:
        inst = self._installations.get(owner)
        if inst is not None:
            return inst
        status, body = await self._call("GET", f"/repos/{repo}/installation", None)
        if status != 200:
            raise self._classify(status, body, f"installation lookup for {repo}")
        try:
            inst = int(body["id"])
        except (KeyError, TypeError, ValueError):
            raise CredentialUnavailable(
                "request_failed", "installation lookup answered without an id"
            ) from None
        self._installations[owner] = inst
        return inst

    async def _mint(
        self, inst: int, owner: str, names: tuple[str, ...], perms: dict[str, str]
    ) -> _Minted:
        payload: dict[str, Any] = {"repositories": list(names)}
        if perms:
            payload["permissions"] = perms
        status, body = await self._call("POST", f"/app/installations/{inst}/access_tokens", payload)
        if status == 404:
            self._installations.pop(owner.lower(), None)
        if status not in (200, 201):
            raise self._classify(status, body, f"token request for installation {inst}")
        try:
            token = str(body["token"])
            expires = dt.datetime.fromisoformat(str(body["expires_at"]).replace("Z", "+00:00"))
        except (KeyError, TypeError, ValueError):
            raise CredentialUnavailable(
                "request_failed", "token response lacked token or expires_at"
            ) from None
        self.mints += 1
        return _Minted(token, expires.timestamp())


class Credentials:
    """The real value a rule's ``replace`` stands for: given, or minted here."""

    def __init__(self, github_app: GitHubAppMinter | None = None) -> None:
        self.github_app = github_app

    async def token_for(self, replace: Replacement) -> str:
        if replace.token is not None:
            return replace.token
        if self.github_app is None:
            raise CredentialUnavailable(
                "not_configured",
                "this proxy has no GitHub App: start it with --github-app-id and "
                "--github-app-key-file",
            )
        return await self.github_app.token(replace.repositories or (), replace.permissions)
