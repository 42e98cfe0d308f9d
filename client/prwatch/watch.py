"""``watch``: the poll loop for orchestrators that do not want to write one.

It composes the primitives: poll with :class:`GitHubReader`, fold each poll
with :func:`advance`, yield each :class:`Wake`. It ends by itself after the
wake that reports a merge or close (nothing more can happen that a model must
act on), or after ``max_polls``; otherwise the caller stops it by leaving the
``async for`` loop. ``on_state`` receives the state after every poll so the
caller can persist it (e.g. with ``registry.put_state``) and resume with
``state=`` after a restart without repeating wakes.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable

from ..providers.base import TokenProvider
from .notify import (
    DEFAULT_STALL_POLLS,
    Wake,
    WatchState,
    advance,
    initial_state,
)
from .reader import DEFAULT_API_URL, GitHubReader, Sleep
from .retry import DEFAULT_POLICY, RetryPolicy

DEFAULT_INTERVAL_S = 30.0


async def watch(
    repo: str,
    number: int,
    *,
    provider: TokenProvider,
    owner: str | None = None,
    api_url: str = DEFAULT_API_URL,
    interval_s: float = DEFAULT_INTERVAL_S,
    stall_polls: int = DEFAULT_STALL_POLLS,
    state: WatchState | None = None,
    on_state: Callable[[WatchState], None] | None = None,
    max_polls: int | None = None,
    ssl_context: ssl.SSLContext | None = None,
    policy: RetryPolicy = DEFAULT_POLICY,
    sleep: Sleep = asyncio.sleep,
) -> AsyncIterator[Wake]:
    """Poll ``repo``'s PR ``number`` every ``interval_s`` and yield its wakes.

    ``owner`` is the login whose reviews count (default: the PR author).
    Errors that retrying cannot fix raise :class:`PRWatchError`.
    """
    if interval_s < 0:
        raise ValueError("interval_s must not be negative")
    current = state or initial_state()
    polls = 0
    async with GitHubReader(
        repo, provider, api_url=api_url, ssl_context=ssl_context, policy=policy, sleep=sleep
    ) as reader:
        while max_polls is None or polls < max_polls:
            if polls:
                await sleep(interval_s)
            snap = await reader.snapshot(number, owner=owner)
            polls += 1
            current, wake = advance(current, snap, stall_polls=stall_polls)
            if on_state is not None:
                on_state(current)
            if wake is not None:
                yield wake
                if wake.snapshot.closed:
                    return
