"""GitHub App installation tokens, minted per (repositories, permissions).

Why per-command minting: an installation token can be narrowed to a set of
repositories and permissions when it is created. The GitHub shell tool asks for
exactly the one repository a command declared, so even the real token (which
only the proxy ever holds) cannot touch anything else. Tokens live an hour; we
cache each scope until five minutes before ``expires_at`` so consecutive
commands do not mint again, and single-flight the mint so concurrent callers
share one request.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import aiohttp

from .base import IssuedToken
from .errors import (
    CredentialError,
    InstallationRequiredError,
    TokenRequestFailedError,
    TokenRequestRejectedError,
)
from .github_api import app_headers, json_object
from .jwt import load_private_key

REFRESH_MARGIN_S = 300
DEFAULT_API_URL = "https://api.github.com"

_CacheKey = tuple[tuple[str, ...], tuple[tuple[str, str], ...]]


def _parse_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


class GitHubAppProvider:
    """Mints installation tokens for one GitHub App installation.

    ``installation_id`` or ``org`` must be given; with only ``org`` the
    installation is looked up once (``GET /orgs/{org}/installation``).
    ``api_url`` is ``https://api.github.com`` or a GitHub Enterprise
    ``https://HOST/api/v3``. ``ssl`` lets tests and GHES trust a private CA.
    """

    def __init__(
        self,
        app_id: int | str,
        private_key_pem: str | bytes,
        installation_id: int | None = None,
        org: str | None = None,
        api_url: str = DEFAULT_API_URL,
        *,
        ssl_context: ssl.SSLContext | None = None,
        clock: Callable[[], float] = time.time,
        timeout_s: float = 30.0,
        refresh_margin_s: float = REFRESH_MARGIN_S,
    ) -> None:
        if installation_id is None and not org:
            raise ValueError("GitHubAppProvider needs installation_id or org")
        self.app_id = str(app_id)
        self._key = load_private_key(private_key_pem)
        self.installation_id = installation_id
        self.org = org
        self.api_url = api_url.rstrip("/")
        self._ssl = ssl_context
        self._clock = clock
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._margin = refresh_margin_s
        self._cache: dict[_CacheKey, IssuedToken] = {}
        self._locks: dict[_CacheKey, asyncio.Lock] = {}
        self._install_lock = asyncio.Lock()
        self.mint_count = 0

    def __repr__(self) -> str:
        return (
            f"GitHubAppProvider(app_id={self.app_id!r}, installation_id={self.installation_id!r}, "
            f"org={self.org!r}, api_url={self.api_url!r})"
        )

    def _fresh(self, tok: IssuedToken) -> bool:
        if tok.expires_at is None:
            return False
        return tok.expires_at.timestamp() - self._margin > self._clock()

    async def get_token(
        self,
        repositories: Sequence[str] = (),
        permissions: Mapping[str, str] | None = None,
    ) -> IssuedToken:
        """A token for exactly ``repositories`` ("owner/repo" or "repo") and ``permissions``."""
        if self.org:
            foreign = [
                r for r in repositories if "/" in r and r.split("/")[0].lower() != self.org.lower()
            ]
            if foreign:
                # GitHub takes bare names scoped to the installation's account; never let
                # "other/widgets" silently become "<org>/widgets".
                raise TokenRequestRejectedError(
                    f"{foreign[0]} is not in {self.org}, the account this app installation serves"
                )
        names = tuple(sorted({r.split("/", 1)[-1] for r in repositories}))
        perms = tuple(sorted((permissions or {}).items()))
        key: _CacheKey = (names, perms)
        cached = self._cache.get(key)
        if cached is not None and self._fresh(cached):
            return cached
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            cached = self._cache.get(key)
            if cached is not None and self._fresh(cached):
                return cached
            self._cache.pop(key, None)
            issued = await self._mint(names, dict(perms), tuple(repositories))
            self._cache[key] = issued
            return issued

    def invalidate(self) -> None:
        """Forget every cached token (e.g. after a 401 from GitHub)."""
        self._cache.clear()

    def _headers(self) -> dict[str, str]:
        return app_headers(self.app_id, self._key, "airlock-client")

    async def _installation(self, http: aiohttp.ClientSession) -> int:
        if self.installation_id is not None:
            return self.installation_id
        async with self._install_lock:
            if self.installation_id is not None:
                return self.installation_id
            url = f"{self.api_url}/orgs/{self.org}/installation"
            status, body = await self._request(http, "GET", url, None)
            if status == 404:
                raise InstallationRequiredError(
                    f"app installation is required: the app is not installed on {self.org!r}",
                    status=status,
                )
            if status >= 400:
                raise self._classify(status, body, "installation lookup")
            try:
                self.installation_id = int(body["id"])
            except (KeyError, TypeError, ValueError) as exc:
                raise TokenRequestFailedError(
                    "installation lookup returned no id", status=status, cause=exc
                ) from exc
            return self.installation_id

    async def _mint(
        self, names: tuple[str, ...], perms: dict[str, str], full: tuple[str, ...]
    ) -> IssuedToken:
        try:
            async with aiohttp.ClientSession(timeout=self._timeout) as http:
                inst = await self._installation(http)
                payload: dict[str, Any] = {}
                if names:
                    payload["repositories"] = list(names)
                if perms:
                    payload["permissions"] = perms
                url = f"{self.api_url}/app/installations/{inst}/access_tokens"
                status, body = await self._request(http, "POST", url, payload)
        except CredentialError:
            raise
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise TokenRequestFailedError(
                f"token request to {self.api_url} failed: {type(exc).__name__}", cause=exc
            ) from exc
        if status == 404:
            raise InstallationRequiredError(
                f"app installation is required: installation {inst} not found", status=status
            )
        if status >= 400:
            raise self._classify(status, body, "token request")
        try:
            token = str(body["token"])
            expires_at = _parse_time(str(body["expires_at"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise TokenRequestFailedError(
                "token response lacked token or expires_at", status=status, cause=exc
            ) from exc
        self.mint_count += 1
        return IssuedToken(token, expires_at, full)

    async def _request(
        self, http: aiohttp.ClientSession, method: str, url: str, payload: dict[str, Any] | None
    ) -> tuple[int, dict[str, Any]]:
        try:
            async with http.request(
                method, url, json=payload, headers=self._headers(), ssl=self._ssl or True
            ) as resp:
                return resp.status, await json_object(resp)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise TokenRequestFailedError(
                f"{method} {url.split('?')[0]} failed: {type(exc).__name__}: {exc}", cause=exc
            ) from exc

    @staticmethod
    def _classify(status: int, body: Mapping[str, Any], what: str) -> CredentialError:
        message = str(body.get("message", ""))[:300]
        text = f"{what} answered HTTP {status}" + (f": {message}" if message else "")
        if status in (401, 403, 422):
            return TokenRequestRejectedError(text, status=status)
        return TokenRequestFailedError(text, status=status)
