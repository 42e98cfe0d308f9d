"""``file_search`` (placeholder until the ripgrep engine lands)."""

from __future__ import annotations

from airlock.daemon.context import ToolContext
from airlock.daemon.errors import Internal
from airlock.daemon.protocol import FileSearchInput, FileSearchOutput


async def file_search(ctx: ToolContext, req: FileSearchInput) -> FileSearchOutput:
    raise Internal("file_search is not available in this build")
