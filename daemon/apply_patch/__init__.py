"""``apply_patch`` (placeholder until the patch engine lands)."""

from __future__ import annotations

from airlock.daemon.context import ToolContext
from airlock.daemon.errors import Internal
from airlock.daemon.protocol import ApplyPatchInput, ApplyPatchOutput


async def apply_patch(ctx: ToolContext, req: ApplyPatchInput) -> ApplyPatchOutput:
    raise Internal("apply_patch is not available in this build")


async def recover(ctx: ToolContext) -> None:
    """Finish or undo patches interrupted by a crash (journal replay)."""
