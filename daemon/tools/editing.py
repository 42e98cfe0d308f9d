"""The write half every editing tool shares: lock, verify, journal, write, roll back, diagnose.

``file_write``, ``file_patch``, ``file_multi_patch`` and ``apply_patch`` all
commit through :func:`write_all` (the journalled committer of
:mod:`airlock.daemon.commit.committer`), so after a kill at any moment
each call is whole or absent, and a killed single write leaves a journal that
lets the next start sweep its temp file.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar

from ..commit.committer import commit
from ..commit.journal import journal_root
from ..context import ToolContext
from ..diagnostics.tracker import EditTracker
from ..fsio import CommitFailed, PlannedWrite
from ..paths import ResolvedPath

T = TypeVar("T")


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


async def finish_even_if_cancelled(work: Awaitable[T]) -> T:
    """Let a started write run to its end, and the caller's locks stay held until it has,
    even if the caller is cancelled (the client went away)."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        raise


async def write_all(
    ctx: ToolContext,
    tracker: EditTracker,
    plans: list[PlannedWrite],
    resolved: Sequence[ResolvedPath] = (),
) -> None:
    """Write every plan or none; the error says what was rolled back.

    ``resolved`` is accepted for the callers' symmetry; every path is walked
    again from its root fd by the writer itself, so nothing needs re-checking.
    """
    await tracker.before_write()
    tracker.expect(plans)
    root = journal_root(ctx.config.state, ctx.roots.workspace)
    try:
        await finish_even_if_cancelled(
            asyncio.to_thread(commit, ctx.roots, plans, journal_root=root)
        )
    except CommitFailed as exc:
        raise exc.as_error() from exc
