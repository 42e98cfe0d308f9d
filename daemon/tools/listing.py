"""``file_list`` (placeholder until the listing lands)."""

from __future__ import annotations

from airlock.daemon.context import ToolContext
from airlock.daemon.errors import Internal
from airlock.daemon.protocol import FileListInput, FileListOutput


async def file_list(ctx: ToolContext, req: FileListInput) -> FileListOutput:
    raise Internal("file_list is not available in this build")
