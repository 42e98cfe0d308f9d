"""The diagnostics service the tools call.

``run`` answers the ``diagnostics`` tool; ``tracker`` gives an editing tool a
baseline-before / result-after pair so it reports only what the edit
introduced. Checks are filled in by the modules beside this one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from airlock.daemon.paths import ResolvedPath
from airlock.daemon.protocol import (
    ALL_CHECKS,
    CheckName,
    Diagnostic,
    DiagnosticsOutput,
    SkippedCheck,
)


class EditTracker:
    """Baseline before an edit, the new problems after it."""

    def __init__(
        self, service: DiagnosticsService, paths: Sequence[ResolvedPath], enabled: bool
    ) -> None:
        self.service = service
        self.paths = list(paths)
        self.enabled = enabled

    async def start(self) -> None:
        """Begin the baseline; called before validation so the two overlap."""

    async def before_write(self) -> None:
        """Wait for the baseline; called right before the first byte is written."""

    async def finish(self) -> tuple[list[Diagnostic], list[SkippedCheck]]:
        return [], []


class DiagnosticsService:
    def __init__(self, workspace: Path, timeout_s: float = 20.0) -> None:
        self.workspace = workspace
        self.timeout_s = timeout_s

    async def run(
        self, paths: Sequence[ResolvedPath], checks: Sequence[CheckName] = ALL_CHECKS
    ) -> DiagnosticsOutput:
        return DiagnosticsOutput(
            diagnostics=[],
            checks_run=[],
            skipped=[SkippedCheck(check=c, reason="not available in this build") for c in checks],
        )

    def tracker(self, paths: Sequence[ResolvedPath], enabled: bool = True) -> EditTracker:
        return EditTracker(self, paths, enabled)
