"""One ``async with`` protocol for everything in the client that holds a connection.

``DaemonClient``, ``ProxyClient`` and ``WatchStream`` each release what they
hold in ``aclose()``; leaving an ``async with`` block calls it, whatever ended
the block. Writing that once keeps the three from drifting apart.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self


class AsyncClosing:
    """``async with x`` yields ``x`` and calls ``await x.aclose()`` on the way out."""

    async def aclose(self) -> None:
        """Release what this object holds; subclasses override it and keep it idempotent."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
