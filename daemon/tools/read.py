"""``file_read`` and ``file_multi_read``: line paging fitted to a character budget."""

from __future__ import annotations

import asyncio
import base64
import os
import stat

from airlock.daemon.context import ToolContext
from airlock.daemon.errors import AirlockError, InvalidRequest, IsDirectory, NotFound, TooLarge
from airlock.daemon.fsio import read_file_bytes
from airlock.daemon.paths import ResolvedPath
from airlock.daemon.protocol import (
    ErrorBody,
    FileMultiReadInput,
    FileMultiReadOutput,
    FileReadError,
    FileReadInput,
    ImageFile,
    TextFile,
)
from airlock.daemon.text import decode, split_lines

_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def sniff_image(head: bytes) -> str | None:
    for magic, mime in _IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _resolve_and_read(
    ctx: ToolContext, raw: str, granted: list[str], offset: int, limit: int, budget: int
) -> TextFile | ImageFile:
    """Resolution stats every path component, so it runs in the same worker thread as the read."""
    resolved = ctx.resolve(raw, intent="read", granted=granted)
    return _read_sync(ctx, resolved, offset, limit, budget)


def _read_sync(
    ctx: ToolContext, resolved: ResolvedPath, offset: int, limit: int, budget: int
) -> TextFile | ImageFile:
    display = resolved.display
    try:
        st = os.stat(resolved.real)
    except FileNotFoundError:
        raise NotFound(
            f"{display} does not exist; check the path with file_list or file_search",
            {"path": display},
        ) from None
    if stat.S_ISDIR(st.st_mode):
        raise IsDirectory(f"{display} is a directory; list it with file_list", {"path": display})
    with open(resolved.real, "rb") as handle:
        head = handle.read(16)
    mime = sniff_image(head)
    if mime is not None:
        if st.st_size > ctx.config.max_image_bytes:
            raise TooLarge(
                f"{display} is a {st.st_size}-byte image, over the "
                f"{ctx.config.max_image_bytes}-byte limit for images",
                {"path": display, "bytes": st.st_size},
            )
        data = read_file_bytes(resolved.real, display=display)
        return ImageFile(
            path=display, mime=mime, data_base64=base64.b64encode(data).decode(), bytes=len(data)
        )
    data = read_file_bytes(resolved.real, display=display, max_bytes=ctx.config.max_text_bytes)
    decoded = decode(data, path=display)
    return page_text(display, decoded.text, decoded.line_ending, decoded.bom, offset, limit, budget)


def page_text(
    display: str,
    text: str,
    line_ending: str,
    bom: bool,
    offset: int,
    limit: int,
    budget: int,
) -> TextFile:
    """Whole lines from ``offset`` that fit ``budget``; ``next_offset`` never skips text."""
    lines = split_lines(text)
    total = len(lines)
    final_newline = text.endswith("\n")
    common = {"path": display, "total_lines": total, "line_ending": line_ending, "bom": bom}
    if total == 0 or offset > total:
        if offset > 1 and offset > total:
            raise InvalidRequest(
                f"offset {offset} is past the end of {display}, which has {total} lines; "
                "start at 1 or at a line within the file",
                {"path": display, "total_lines": total},
            )
        return TextFile(
            content="", start_line=1, end_line=0, next_offset=None, truncated=False, **common
        )
    start = offset - 1
    first = lines[start]
    if len(first) + 1 > budget and len(first) >= budget:
        nxt = offset + 1 if offset < total else None
        return TextFile(
            content=first[:budget],
            start_line=offset,
            end_line=offset,
            next_offset=nxt,
            truncated=True,
            line_truncated=True,
            message=(
                f"line {offset} is {len(first)} characters, longer than budget_chars={budget}; "
                "only its start is shown and the rest of this line cannot be paged by line "
                "offset: read it with exec and a byte range (e.g. cut -c or dd)"
            ),
            **common,
        )
    used = 0
    end = start
    stop = min(total, start + limit)
    while end < stop:
        cost = len(lines[end]) + 1
        if used + cost > budget and end > start:
            break
        used += cost
        end += 1
    chunk = lines[start:end]
    content = "\n".join(chunk)
    if end < total or final_newline:
        content += "\n"
    nxt = end + 1 if end < total else None
    return TextFile(
        content=content,
        start_line=offset,
        end_line=end,
        next_offset=nxt,
        truncated=nxt is not None,
        **common,
    )


async def file_read(ctx: ToolContext, req: FileReadInput) -> TextFile | ImageFile:
    return await asyncio.to_thread(
        _resolve_and_read, ctx, req.path, req.granted_paths, req.offset, req.limit, req.budget_chars
    )


async def file_multi_read(ctx: ToolContext, req: FileMultiReadInput) -> FileMultiReadOutput:
    remaining = req.budget_chars
    files: list[TextFile | ImageFile | FileReadError] = []
    for raw in req.paths:
        if remaining <= 0:
            files.append(
                FileReadError(
                    path=raw,
                    error=ErrorBody(
                        code="too_large",
                        message="the shared budget_chars was used up by earlier files; "
                        "read this file on its own with file_read",
                    ),
                )
            )
            continue
        try:
            result = await asyncio.to_thread(
                _resolve_and_read, ctx, raw, req.granted_paths, 1, 100000, remaining
            )
        except AirlockError as exc:
            files.append(
                FileReadError(path=raw, error=ErrorBody(code=exc.code, message=exc.message))
            )
            continue
        if isinstance(result, TextFile):
            remaining -= len(result.content)
        else:
            remaining -= len(result.data_base64)
        files.append(result)
    return FileMultiReadOutput(files=files)
