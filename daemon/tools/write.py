"""``file_write``: whole-file create or replace, optionally compare-and-swap."""

from __future__ import annotations

import asyncio
import os
import stat

from airlock.daemon.context import ToolContext
from airlock.daemon.diffs import unified_diff_async
from airlock.daemon.errors import IsDirectory, NotFound, StaleWrite
from airlock.daemon.fsio import PlannedWrite, read_file_bytes, sha256_hex
from airlock.daemon.paths import ResolvedPath
from airlock.daemon.protocol import FileWriteInput, FileWriteOutput
from airlock.daemon.text import decode
from airlock.daemon.tools.editing import editing, write_all


def _plan(
    ctx: ToolContext, resolved: ResolvedPath, req: FileWriteInput
) -> tuple[PlannedWrite, str | None, str]:
    """The write to make, the old text (None when creating) and the new text.

    When an existing text file is replaced with LF content, the file's own
    conventions (BOM, CRLF) are kept, exactly as for a patch; content that
    already carries CR characters is written as given.
    """
    path = resolved.real
    display = resolved.display
    if path.is_dir():
        raise IsDirectory(f"{display} is a directory; choose a file path", {"path": display})
    before: bytes | None = None
    mode: int | None = None
    if path.exists():
        before = read_file_bytes(path, display=display, max_bytes=ctx.config.max_text_bytes)
        mode = stat.S_IMODE(os.stat(path).st_mode)
    if req.expected_sha256 is not None:
        current = sha256_hex(before) if before is not None else None
        if current != req.expected_sha256:
            raise StaleWrite(
                f"{display} "
                + ("does not exist" if current is None else f"has sha256 {current}")
                + f", not {req.expected_sha256}; re-read it and retry. Nothing was written.",
                {"path": display, "sha256": current},
            )
    if not path.parent.exists() and not req.create_dirs:
        raise NotFound(
            f"the directory of {display} does not exist; pass create_dirs=true or create it",
            {"path": display},
        )
    old_text: str | None = None
    if before is not None:
        decoded = decode(before, path=display)
        old_text = decoded.text
        after = decoded.encode(req.content) if "\r" not in req.content else req.content.encode()
    else:
        after = req.content.encode("utf-8")
    plan = PlannedWrite(path, before=before, after=after, display=display, mode=mode)
    return plan, old_text, req.content.replace("\r\n", "\n")


async def file_write(ctx: ToolContext, req: FileWriteInput) -> FileWriteOutput:
    resolved = ctx.resolve(req.path, intent="write", granted=req.granted_paths)
    async with editing(ctx, [resolved], diagnostics=req.diagnostics) as tracker:
        plan, old_text, new_text = await asyncio.to_thread(_plan, ctx, resolved, req)
        await write_all(ctx, tracker, [plan], [resolved])
        found, skipped = await tracker.finish()
    after = plan.after or b""
    return FileWriteOutput(
        path=resolved.display,
        created=plan.before is None,
        bytes=len(after),
        sha256=sha256_hex(after),
        diff=await unified_diff_async(resolved.display, old_text, new_text),
        diagnostics=found,
        diagnostics_skipped=skipped,
    )
