"""The editing tools' side: baseline before the write, only new problems after it."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ..fsio import PlannedWrite
from ..paths import ResolvedPath
from ..protocol import Diagnostic, SkippedCheck
from .ahead import Ahead
from .baseline import new_findings
from .model import CheckResult, Finding
from .report import Results, capped, skipped_entries


class EditChecks(Protocol):
    """What a tracker needs from the diagnostics service.

    :class:`~airlock.daemon.diagnostics.service.DiagnosticsService` satisfies it;
    the service builds trackers, so naming the needs here keeps this module below it.
    """

    @property
    def edit_checks(self) -> Sequence[str]: ...

    generation: int

    async def collect(
        self,
        paths: Sequence[ResolvedPath],
        checks: Sequence[str],
        *,
        reuse_types: bool = ...,
        worker_plan: dict[Path, list[str]] | None = ...,
        ahead: Ahead | None = ...,
        for_edit: bool = ...,
    ) -> Results: ...

    def ahead(
        self, contents: dict[Path, tuple[str, bytes]], plan: dict[Path, list[str]]
    ) -> Ahead: ...


def _cancel_soon(task: asyncio.Task[Results], loop: asyncio.AbstractEventLoop) -> None:
    if not task.done() and not loop.is_closed():
        loop.call_soon_threadsafe(task.cancel)


class EditTracker:
    """Baseline before an edit, the new problems after it.

    ``start`` launches the baseline as a task so it overlaps the edit's own
    planning; ``before_write`` waits for it (the files must not change under
    it); ``expect`` starts checking the new bytes so that runs while they are
    written; ``finish`` checks what is left and subtracts. Disabled, every
    method returns at once and nothing is spawned.
    """

    def __init__(self, service: EditChecks, paths: Sequence[ResolvedPath], enabled: bool) -> None:
        self.service = service
        self.paths = list(paths)
        self.enabled = enabled
        self._baseline: asyncio.Task[Results] | None = None
        self._worker_plan: dict[Path, list[str]] = {}
        self._ahead: Ahead | None = None

    async def start(self) -> None:
        """Begin the baseline; called before validation so the two overlap."""
        if self.enabled and self._baseline is None:
            self._baseline = asyncio.create_task(
                self.service.collect(
                    self.paths,
                    self.service.edit_checks,
                    reuse_types=True,
                    worker_plan=self._worker_plan,
                    for_edit=True,
                )
            )
            # An edit that fails before writing drops its tracker without finishing:
            # the baseline is then useless, and its checker processes are killed.
            weakref.finalize(self, _cancel_soon, self._baseline, asyncio.get_running_loop())

    async def before_write(self) -> None:
        """Wait for the baseline; called right before the first byte is written."""
        await self._wait_baseline()

    async def _wait_baseline(self) -> Results | None:
        """The baseline, or None when it was cancelled (``cancel``) and we were not."""
        if self._baseline is None:
            return None
        try:
            return await asyncio.shield(self._baseline)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._baseline.cancelled() and (current is None or not current.cancelling()):
                return None
            raise

    def expect(self, writes: Sequence[PlannedWrite]) -> None:
        """The edit is about to write ``writes``: check their new bytes meanwhile.

        Called after :meth:`before_write` (the baseline's plan is known). Only
        the byte-level checks (syntax, whitespace) start here; whatever needs
        the files on disk (git, types) runs in :meth:`finish`.
        """
        if not self.enabled or self._baseline is None or not self._baseline.done():
            return
        mine = {p.real for p in self.paths}
        contents = {
            w.target.real: (w.display, w.after)
            for w in writes
            if w.after is not None and w.target.real in mine
        }
        if contents:
            self._ahead = self.service.ahead(contents, self._worker_plan)

    def cancel(self) -> None:
        """Abandon the baseline (the edit failed before writing); its checkers are killed."""
        if self._baseline is not None and not self._baseline.done():
            self._baseline.cancel()
        if self._ahead is not None:
            self._ahead.cancel()

    async def finish(self) -> tuple[list[Diagnostic], list[SkippedCheck]]:
        if not self.enabled:
            return [], []
        checks = self.service.edit_checks
        self.service.generation += 1  # a write happened: remembered type results are stale
        before = await self._wait_baseline()
        if before is None:  # no baseline, no way to tell new from old: report nothing
            return [], [SkippedCheck(check=c, reason="baseline: cancelled") for c in checks]
        after = await self.service.collect(self.paths, checks, ahead=self._ahead, for_edit=True)
        findings: dict[str, list[Finding]] = {}
        merged: Results = {}
        for check in checks:
            old, new = before[check], after[check]
            blind = old.skipped_paths  # no baseline for these: their findings cannot be judged
            candidates = [f for f in new.findings if f.diagnostic.path not in blind]
            findings[check] = new_findings(old.findings, candidates)
            result = CheckResult(check, ran=new.ran)
            result.skipped = [
                *new.skipped,
                *(f"baseline: {r}" for r in old.skipped if r not in new.skipped),
            ]
            merged[check] = result
        diagnostics = capped(merged, checks, findings)
        return diagnostics, skipped_entries(merged, checks, with_not_applicable=False)
