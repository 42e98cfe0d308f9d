"""The worker checks of an edit's new bytes, started before the bytes reach the disk.

Its own module because both sides use it: the service starts the checks
(:meth:`~airlock.daemon.diagnostics.service.DiagnosticsService.ahead`) and the
editing tools' tracker holds them until the after-check collects them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path

from .report import Results


class Ahead:
    """Worker checks of an edit's new bytes, running while the edit writes them."""

    def __init__(self) -> None:
        self._jobs: dict[Path, tuple[list[str], Results, asyncio.Future[None]]] = {}

    def add(self, real: Path, checks: list[str], results: Results, job: Awaitable[None]) -> None:
        self._jobs[real] = (checks, results, asyncio.ensure_future(job))

    def checks_for(self, real: Path) -> list[str] | None:
        """Which checks ``real``'s new bytes are being checked for (None: not checked)."""
        entry = self._jobs.get(real)
        return entry[0] if entry is not None else None

    async def results(self, real: Path) -> Results:
        _, results, job = self._jobs[real]
        await asyncio.shield(job)
        return results

    def cancel(self) -> None:
        for _, _, job in self._jobs.values():
            job.cancel()
