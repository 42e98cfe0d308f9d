"""``file_write``: whole-file create or replace, optionally compare-and-swap."""

from __future__ import annotations

import asyncio
import os

from ..context import ToolContext
from ..diffs import unified_diff_async
from ..errors import NotFound, StaleWrite, TooLarge
from ..fsio import PlannedWrite, read_all, refuse_read_only, sha256_hex
from ..paths import ResolvedPath, check_regular
from ..protocol import FileWriteInput, FileWriteOutput
from ..text import decode
from .editing import editing, write_all


def _current(ctx: ToolContext, resolved: ResolvedPath, req: FileWriteInput) -> bytes | None:
    """The file's bytes now (None when it does not exist), through the resolver's fds.

    A FIFO, socket or device is refused before anything opens it; a file whose
    owner has no write bit is ``read_only``; a missing directory is fine only
    with ``create_dirs``.
    """
    display = resolved.display
    try:
        with ctx.roots.parent(resolved) as anchor:
            st = anchor.lstat()
            if st is None:
                return None
            check_regular(st, display)
            refuse_read_only(st, display)
            fd, st = anchor.open_regular()
            try:
                limit = ctx.config.max_text_bytes
                if st.st_size > limit:
                    raise TooLarge(
                        f"{display} is {st.st_size} bytes, over the {limit}-byte limit; "
                        "replace it with exec instead",
                        {"path": display, "bytes": st.st_size, "limit": limit},
                    )
                return read_all(fd, st.st_size)
            finally:
                os.close(fd)
    except NotFound:
        if not req.create_dirs:
            raise NotFound(
                f"the directory of {display} does not exist; pass create_dirs=true or create it",
                {"path": display},
            ) from None
        return None


def _plan(
    ctx: ToolContext, resolved: ResolvedPath, req: FileWriteInput
) -> tuple[PlannedWrite, str | None, str]:
    """The write to make, the old text (None when creating) and the new text.

    When an existing text file is replaced with LF content, the file's own
    conventions (BOM, CRLF) are kept, exactly as for a patch; content that
    already carries CR characters is written as given.
    """
    display = resolved.display
    before = _current(ctx, resolved, req)
    if req.expected_sha256 is not None:
        current = sha256_hex(before) if before is not None else None
        if current != req.expected_sha256:
            raise StaleWrite(
                f"{display} "
                + ("does not exist" if current is None else f"has sha256 {current}")
                + f", not {req.expected_sha256}; re-read it and retry. Nothing was written.",
                {"path": display, "sha256": current},
            )
    old_text: str | None = None
    if before is not None:
        decoded = decode(before, path=display)
        old_text = decoded.text
        after = decoded.encode(req.content) if "\r" not in req.content else req.content.encode()
    else:
        after = req.content.encode("utf-8")
    plan = PlannedWrite(resolved, before=before, after=after, display=display)
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
