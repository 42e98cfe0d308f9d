"""An injected ``sleep`` and clock for code that takes one (retries, polling loops, TTLs).

Tests pass a :class:`FakeSleep` instead of waiting on the real clock: it
records every pause it was asked for and returns at once, optionally running
the next step of a script first (what "happens" while the code sleeps).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence


class FakeSleep:
    """Records each requested pause; runs the next scripted step instead of waiting."""

    def __init__(self, steps: Sequence[Callable[[], Awaitable[None]]] = ()) -> None:
        self.pauses: list[float] = []
        self._steps = list(steps)

    async def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)
        if self._steps:
            await self._steps.pop(0)()


class FakeClock:
    """A wall clock (epoch seconds) that only moves when the test says so.

    Hand it wherever code takes a ``clock`` (stores, the expiry watcher,
    ``ProxyContext.create``) and :meth:`advance` it past a TTL instead of
    waiting for the real one to pass.
    """

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
