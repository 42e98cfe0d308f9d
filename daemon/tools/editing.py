"""The write half every editing tool shares: lock, re-check, write, roll back, diagnose."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from airlock.daemon.context import ToolContext
from airlock.daemon.diagnostics.service import EditTracker
from airlock.daemon.fsio import CommitFailed, PlannedWrite, commit_writes
from airlock.daemon.paths import ResolvedPath


@asynccontextmanager
async def editing(
    ctx: ToolContext, paths: Sequence[ResolvedPath], *, diagnostics: bool
) -> AsyncIterator[EditTracker]:
    """Hold the per-file locks of ``paths`` and start the diagnostics baseline.

    Planning happens inside this block, so two edits of one file never plan
    against the same original.
    """
    async with ctx.locks.hold(p.real for p in paths):
        tracker = ctx.diag.tracker(paths, diagnostics)
        await tracker.start()
        try:
            yield tracker
        except BaseException:
            # The edit failed (or was cancelled) before finishing: nobody will
            # collect the baseline, so stop its checkers now.
            tracker.cancel()
            raise


async def write_all(
    ctx: ToolContext,
    tracker: EditTracker,
    plans: list[PlannedWrite],
    resolved: Sequence[ResolvedPath],
) -> None:
    """Write every plan or none; the error says what was rolled back.

    The re-check of each real path and the writes run in one worker thread
    (both touch the file system); the shield lets a write that started finish
    even if the client goes away.
    """
    await tracker.before_write()

    def recheck_and_commit() -> None:
        for path in resolved:
            ctx.roots.recheck(path)
        commit_writes(plans)

    try:
        await asyncio.shield(asyncio.to_thread(recheck_and_commit))
    except CommitFailed as exc:
        raise exc.as_error() from exc
