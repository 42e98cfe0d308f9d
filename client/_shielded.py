"""Cleanup that must finish even when the caller is cancelled.

Deleting a lease, removing a directory that held a token: if the task doing it
is cancelled half way, the cleanup still runs to its end before the
cancellation goes on, so nothing is left behind that the caller meant to remove.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TypeVar

T = TypeVar("T")


async def finish_shielded(task: asyncio.Future[T], *suppress: type[BaseException]) -> T:
    """Await ``task`` shielded from cancellation.

    When the caller is cancelled meanwhile, ``task`` is still awaited to its
    end (its errors of the ``suppress`` types dropped), then the cancellation
    is raised again.
    """
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(*suppress):
            await task
        raise
