"""``apply_patch``: the Codex-format patch engine, atomic and crash-safe.

parse (parser.py) -> resolve paths -> lock the root and the files -> plan every
chunk in memory (planner.py, matcher.py) -> re-check and write with a journal
(committer.py, journal.py). ``recover`` replays unfinished journals at start-up.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
from collections.abc import Sequence
from pathlib import Path

from ..commit.committer import commit, failure_error
from ..commit.journal import journal_root, recover_all
from ..context import ToolContext
from ..errors import InvalidRequest, NotFound
from ..fsio import CommitFailed
from ..offload import run_cpu
from ..paths import ResolvedPath
from ..protocol import AppliedFile, ApplyPatchInput, ApplyPatchOutput
from ..tools.editing import editing, finish_even_if_cancelled
from .parser import parse_invocation
from .planner import (
    PlannedChange,
    ResolvedOperation,
    resolve_operations,
)
from .planner import plan_changes as _plan_changes

log = logging.getLogger(__name__)

_LETTER = {"add": "A", "update": "M", "move": "M", "delete": "D"}


def _resolve_root(ctx: ToolContext, req: ApplyPatchInput, cd: str | None = None) -> ResolvedPath:
    # ``cd DIR && apply_patch <<...``: DIR is resolved like root (relative to it, confined).
    raw = req.root if cd is None else posixpath.join(req.root, cd)
    root = ctx.resolve(raw, intent="write", granted=req.granted_paths)
    try:
        with ctx.roots.directory(root):
            pass
    except NotFound:
        raise NotFound(
            f"the patch root {raw!r} does not exist; pass an existing directory as root",
            {"root": raw},
        ) from None
    except InvalidRequest:
        raise InvalidRequest(
            f"the patch root {raw!r} is a file; pass a directory as root", {"root": raw}
        ) from None
    return root


def _prepare(
    ctx: ToolContext, req: ApplyPatchInput
) -> tuple[ResolvedPath, list[ResolvedOperation]]:
    """Parse and resolve (one worker-thread hop): nothing here needs the locks."""
    ops, cd = parse_invocation(req.patch)
    root = _resolve_root(ctx, req, cd)
    return root, resolve_operations(ctx, root, ops, req.granted_paths)


def _allowed_roots(ctx: ToolContext, granted: Sequence[str]) -> list[Path]:
    roots = [ctx.roots.workspace, *ctx.roots.extra]
    roots.extend(Path(g) for g in granted if Path(g).is_absolute())
    return roots


def _summary(changes: Sequence[PlannedChange]) -> str:
    lines = ["Success. Updated the following files:"]
    for change in changes:
        line = f"{_LETTER[change.operation]} {change.path.display}"
        if change.previous is not None:
            line += f" (moved from {change.previous.display})"
        lines.append(line)
    return "\n".join(lines)


async def apply_patch(ctx: ToolContext, req: ApplyPatchInput) -> ApplyPatchOutput:
    root, resolved_ops = await asyncio.to_thread(_prepare, ctx, req)
    touched: list[ResolvedPath] = []
    for item in resolved_ops:
        touched.append(item.path)
        if item.move_to is not None:
            touched.append(item.move_to)

    async with (
        ctx.root_locks.hold([root.root]),
        editing(ctx, touched, diagnostics=req.diagnostics) as tracker,
    ):
        try:
            changes = await run_cpu(lambda: _plan_changes(ctx, resolved_ops))
            writes = [w for change in changes for w in change.writes]
            await tracker.before_write()
            tracker.expect(writes)
            await finish_even_if_cancelled(
                asyncio.to_thread(
                    commit,
                    ctx.roots,
                    writes,
                    journal_root=journal_root(ctx.config.state, ctx.roots.workspace),
                    allowed_roots=_allowed_roots(ctx, req.granted_paths),
                )
            )
        except CommitFailed as exc:
            tracker.cancel()
            raise failure_error(exc) from exc
        except BaseException:
            # Nothing (or nothing lasting) was written: the baseline is useless.
            tracker.cancel()
            raise
        found, skipped = await tracker.finish()
    return ApplyPatchOutput(
        files=[
            AppliedFile(
                operation=change.operation,
                path=change.path.display,
                previous_path=change.previous.display if change.previous is not None else None,
            )
            for change in changes
        ],
        summary=_summary(changes),
        diagnostics=found,
        diagnostics_skipped=skipped,
    )


async def recover(ctx: ToolContext) -> None:
    """Finish or undo patches interrupted by a crash (journal replay), before serving."""
    root = journal_root(ctx.config.state, ctx.roots.workspace)
    results = await asyncio.to_thread(recover_all, root, ctx.roots)
    if any(results):
        log.warning("apply_patch: rolled back %d interrupted patch(es)", sum(map(bool, results)))
