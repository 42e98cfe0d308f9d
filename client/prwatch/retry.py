"""Whether a failed GitHub read is worth repeating, and after how long.

Pure decisions over a status code (or an exception) and the response headers,
so the poll loop stays a thin shell and every rule is tested as a table:

- 2xx/3xx: ``ok``.
- Network errors (connection refused or reset, DNS, timeouts), 408, 5xx and
  429 retry with exponential backoff; ``Retry-After`` (seconds or an HTTP date)
  wins when the server sends it, and a rate-limit reset time
  (``x-ratelimit-remaining: 0`` + ``x-ratelimit-reset``) is honoured the same way.
- 401 means the token expired or was revoked: ``refresh_token`` once, then a
  second 401 in a row fails.
- 403 and 404 (and every other 4xx) fail: repeating a refused or missing
  resource only burns rate limit. The one exception is GitHub's rate limiting,
  which answers 403 with ``x-ratelimit-remaining: 0`` or ``Retry-After``; that is
  a wait, not a refusal.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import aiohttp

Action = Literal["ok", "retry", "refresh_token", "fail"]


@dataclass(frozen=True)
class RetryPolicy:
    """Bounds on retrying: attempts are counted per request, from 0."""

    max_attempts: int = 5
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0


DEFAULT_POLICY = RetryPolicy()


@dataclass(frozen=True)
class RetryDecision:
    action: Action
    reason: str
    delay_s: float = 0.0

    @property
    def should_retry(self) -> bool:
        return self.action in ("retry", "refresh_token")


def backoff(attempt: int, policy: RetryPolicy = DEFAULT_POLICY) -> float:
    """Exponential backoff without jitter (deterministic; callers may add jitter)."""
    return float(min(policy.max_delay_s, policy.base_delay_s * (2 ** max(0, attempt))))


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if not headers:
        return None
    lowered = name.lower()
    for key, value in headers.items():
        if key.lower() == lowered:
            return value
    return None


def server_delay(
    headers: Mapping[str, str] | None, *, now: dt.datetime | None = None
) -> float | None:
    """Seconds the server asked us to wait, from ``Retry-After`` or the
    rate-limit reset time; None when it did not say."""
    now = now or dt.datetime.now(dt.UTC)
    retry_after = _header(headers, "retry-after")
    if retry_after is not None:
        value = retry_after.strip()
        if value.isdigit():
            return float(value)
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            if when.tzinfo is None:
                when = when.replace(tzinfo=dt.UTC)
            return max(0.0, (when - now).total_seconds())
    if (_header(headers, "x-ratelimit-remaining") or "").strip() == "0":
        reset = (_header(headers, "x-ratelimit-reset") or "").strip()
        if reset.isdigit():
            return max(0.0, int(reset) - now.timestamp())
    return None


def _is_rate_limited(headers: Mapping[str, str] | None) -> bool:
    return (
        _header(headers, "retry-after") is not None
        or (_header(headers, "x-ratelimit-remaining") or "").strip() == "0"
    )


def _retry(
    reason: str,
    attempt: int,
    policy: RetryPolicy,
    headers: Mapping[str, str] | None,
    now: dt.datetime | None,
) -> RetryDecision:
    if attempt + 1 >= policy.max_attempts:
        return RetryDecision("fail", f"{reason}; gave up after {attempt + 1} attempts")
    delay = server_delay(headers, now=now)
    if delay is None:
        delay = backoff(attempt, policy)
    # The server's own figure is honoured even beyond max_delay_s: retrying
    # before a rate-limit reset only earns another refusal.
    return RetryDecision("retry", reason, delay)


def classify_status(
    status: int,
    headers: Mapping[str, str] | None = None,
    *,
    attempt: int = 0,
    token_refreshed: bool = False,
    policy: RetryPolicy = DEFAULT_POLICY,
    now: dt.datetime | None = None,
) -> RetryDecision:
    """Decide what to do with an HTTP answer. ``token_refreshed`` says the
    token was already refreshed once for this request."""
    if 200 <= status < 400:
        return RetryDecision("ok", f"HTTP {status}")
    if status == 401:
        if token_refreshed:
            return RetryDecision("fail", "HTTP 401 again after refreshing the token")
        return RetryDecision("refresh_token", "HTTP 401: the token expired or was revoked")
    if status == 429:
        return _retry("HTTP 429: rate limited", attempt, policy, headers, now)
    if status == 403 and _is_rate_limited(headers):
        return _retry("HTTP 403: rate limited", attempt, policy, headers, now)
    if status == 408 or status >= 500:
        return _retry(f"HTTP {status}: server-side failure", attempt, policy, headers, now)
    return RetryDecision("fail", f"HTTP {status}: not retried")


# Exceptions that mean "the request may not have reached GitHub or its answer
# was lost": worth repeating a read.
_NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncio.TimeoutError,
    aiohttp.ClientConnectionError,
    aiohttp.ClientPayloadError,
)


def classify_error(
    exc: BaseException, *, attempt: int = 0, policy: RetryPolicy = DEFAULT_POLICY
) -> RetryDecision:
    """Decide what to do when a request raised instead of answering."""
    if isinstance(exc, _NETWORK_ERRORS):
        return _retry(f"network error: {type(exc).__name__}", attempt, policy, None, None)
    return RetryDecision("fail", f"{type(exc).__name__} is not a network error")


def classify(
    outcome: int | BaseException,
    headers: Mapping[str, str] | None = None,
    *,
    attempt: int = 0,
    token_refreshed: bool = False,
    policy: RetryPolicy = DEFAULT_POLICY,
    now: dt.datetime | None = None,
) -> RetryDecision:
    """One entry point for both: an HTTP status code or the exception raised."""
    if isinstance(outcome, BaseException):
        return classify_error(outcome, attempt=attempt, policy=policy)
    return classify_status(
        outcome,
        headers,
        attempt=attempt,
        token_refreshed=token_refreshed,
        policy=policy,
        now=now,
    )
