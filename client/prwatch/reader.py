"""A small GitHub REST reader for the poll loop: four GETs per poll.

It reads a PR, its head's check runs and combined status, and its reviews,
with the retry rules of :mod:`airlock.client.prwatch.retry`: backoff on
network errors, 5xx and 429 (honouring ``Retry-After``), one token refresh on
401, and an immediate :class:`PRWatchError` on 403/404. Tokens come from a
credential provider (:mod:`airlock.client.providers`), asked for exactly the
watched repository with read permissions; this runs outside the sandbox, so it
talks to GitHub directly and never through the credential-swapping proxy.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import aiohttp

from ..providers.base import TokenProvider
from .retry import (
    DEFAULT_POLICY,
    RetryDecision,
    RetryPolicy,
    classify_error,
    classify_status,
)
from .snapshot import Snapshot, snapshot

DEFAULT_API_URL = "https://api.github.com"
# What a watcher needs and nothing more: the installation token is narrowed
# to reading this one repository's PRs, checks and statuses.
READ_PERMISSIONS: Mapping[str, str] = {
    "pull_requests": "read",
    "checks": "read",
    "statuses": "read",
    "contents": "read",
}
_MAX_PAGES = 10

Sleep = Callable[[float], Awaitable[None]]


class PRWatchError(Exception):
    """A read that retrying cannot fix (403, 404, a second 401, retries spent)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _next_link(link_header: str | None) -> str | None:
    if not link_header:
        return None
    for part in link_header.split(","):
        url, _, params = part.partition(";")
        if 'rel="next"' in params:
            return url.strip().strip("<>")
    return None


class GitHubReader:
    """Authenticated GETs against one repository, with retry and refresh."""

    def __init__(
        self,
        repo: str,
        provider: TokenProvider,
        *,
        api_url: str = DEFAULT_API_URL,
        ssl_context: ssl.SSLContext | None = None,
        policy: RetryPolicy = DEFAULT_POLICY,
        sleep: Sleep = asyncio.sleep,
        timeout_s: float = 30.0,
        permissions: Mapping[str, str] = READ_PERMISSIONS,
    ) -> None:
        self.repo = repo
        self._provider = provider
        self._api = api_url.rstrip("/")
        self._ssl: ssl.SSLContext | bool = ssl_context or True
        self._policy = policy
        self._sleep = sleep
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._permissions = dict(permissions)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> GitHubReader:
        self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _token(self, refresh: bool) -> str:
        if refresh:
            invalidate = getattr(self._provider, "invalidate", None)
            if callable(invalidate):
                invalidate()
        issued = await self._provider.get_token([self.repo], self._permissions)
        return issued.token

    async def _get_once(self, url: str, token: str) -> tuple[int, Mapping[str, str], Any]:
        assert self._session is not None, "use GitHubReader as an async context manager"
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "airlock-prwatch",
        }
        async with self._session.get(url, headers=headers, ssl=self._ssl) as resp:
            body: Any = None
            if resp.status < 400:
                body = await resp.json(content_type=None)
            else:
                await resp.read()
            return resp.status, dict(resp.headers), body

    async def get(self, path_or_url: str) -> tuple[Any, Mapping[str, str]]:
        """GET with the retry rules; returns the JSON body and the headers."""
        url = path_or_url if "://" in path_or_url else f"{self._api}{path_or_url}"
        attempt = 0
        refreshed = False
        token = await self._token(refresh=False)
        while True:
            decision: RetryDecision
            try:
                status, headers, body = await self._get_once(url, token)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                decision = classify_error(exc, attempt=attempt, policy=self._policy)
                status, headers, body = 0, {}, None
            else:
                decision = classify_status(
                    status, headers, attempt=attempt, token_refreshed=refreshed, policy=self._policy
                )
            if decision.action == "ok":
                return body, headers
            if decision.action == "fail":
                where = url.split("?")[0]
                raise PRWatchError(f"GET {where}: {decision.reason}", status=status or None)
            if decision.action == "refresh_token":
                refreshed = True
                token = await self._token(refresh=True)
                continue
            attempt += 1
            await self._sleep(decision.delay_s)

    async def get_all(self, path: str) -> list[Any]:
        """GET a list resource, following ``Link: rel=next`` (bounded)."""
        items: list[Any] = []
        url: str | None = path
        for _ in range(_MAX_PAGES):
            if url is None:
                break
            body, headers = await self.get(url)
            if isinstance(body, list):
                items.extend(body)
            url = _next_link(headers.get("Link") or headers.get("link"))
        return items

    async def snapshot(self, number: int, *, owner: str | None = None) -> Snapshot:
        """One poll: the PR and what hangs off its head."""
        base = f"/repos/{self.repo}"
        pr, _ = await self.get(f"{base}/pulls/{number}")
        if not isinstance(pr, Mapping):
            raise PRWatchError(f"GET {base}/pulls/{number}: not a JSON object")
        sha = quote(str((pr.get("head") or {}).get("sha") or ""), safe="")
        runs: Sequence[Any] | Mapping[str, Any] = []
        status: Mapping[str, Any] | None = None
        if sha:
            runs_body, _ = await self.get(f"{base}/commits/{sha}/check-runs?per_page=100")
            runs = runs_body if isinstance(runs_body, Mapping) else []
            status_body, _ = await self.get(f"{base}/commits/{sha}/status")
            status = status_body if isinstance(status_body, Mapping) else None
        reviews = await self.get_all(f"{base}/pulls/{number}/reviews?per_page=100")
        snap = snapshot(pr, check_runs=runs, status=status, reviews=reviews, owner=owner)
        return snap if snap.repo else replace(snap, repo=self.repo)
