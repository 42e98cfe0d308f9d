"""An injected ``sleep`` for code that takes one (retries, polling loops).

Tests pass a :class:`FakeSleep` instead of waiting on the real clock: it
records every pause it was asked for and returns at once, optionally running
the next step of a script first (what "happens" while the code sleeps).
"""

from __future__ import annotations

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
