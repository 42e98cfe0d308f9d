"""``file_read`` and ``file_multi_read``: line paging fitted to a character budget."""

from __future__ import annotations

import asyncio
import base64
import os
from bisect import bisect_right
from collections.abc import Awaitable, Callable
from functools import partial
from itertools import accumulate
from typing import Protocol, TypeVar

from ..context import ToolContext
from ..errors import AirlockError, TooLarge
from ..fsio import read_all
from ..paths import ResolvedPath
from ..protocol import (
    ErrorBody,
    FileMultiReadInput,
    FileMultiReadOutput,
    FileReadError,
    FileReadInput,
    ImageFile,
    TextFile,
)
from ..text import StreamPage, check_offset, decode, page_stream, split_lines

# Files up to this size are read whole (the fast path for the usual small file);
# larger ones are decoded and paged as a stream.
STREAM_THRESHOLD = 1 << 20
# Up to this size a read whose lookup and bytes are all in the kernel's caches is
# answered on the event loop (no thread hop); decoding and paging it costs less
# than the hop would.
INLINE_MAX_BYTES = 64 * 1024

_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)

T = TypeVar("T")


class Offload(Protocol):
    """Runs a blocking callable off the event loop (``ThreadHop.run`` or ``asyncio.to_thread``)."""

    def __call__(self, fn: Callable[[], T], /) -> Awaitable[T]: ...


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
    """Resolve and open in one step through the resolver (``Roots.open_for_read``), in the
    worker thread that then reads."""
    resolved, fd, st = ctx.roots.open_for_read(raw, granted)
    try:
        return _read_open(ctx, resolved, fd, st, offset, limit, budget)
    finally:
        os.close(fd)


def read_cached(
    ctx: ToolContext, raw: str, offset: int, limit: int, budget: int
) -> TextFile | ImageFile | None:
    """The answer for a small file that is entirely in memory, without waiting; else None.

    Safe on the event loop: the lookup is ``RESOLVE_CACHED`` (EAGAIN instead of
    a directory read) and the bytes come from ``preadv2(RWF_NOWAIT)`` (EAGAIN or
    a short read instead of disk I/O). Any doubt returns None and the caller
    takes the thread path, which gives the same answer the slow way.
    """
    opened = ctx.roots.open_cached_for_read(raw)
    if opened is None:
        return None
    resolved, fd, st = opened
    try:
        size = st.st_size
        if size > INLINE_MAX_BYTES or size > ctx.config.max_text_bytes:
            return None
        data = _read_nowait(fd, size)
        if data is None:
            return None
        return _read_open(ctx, resolved, fd, st, offset, limit, budget, data)
    finally:
        os.close(fd)


def _read_nowait(fd: int, size: int) -> bytes | None:
    """All ``size`` bytes from the page cache, or None if any would come from storage (or
    the file changed size since ``fstat``: one byte more is asked to see that)."""
    buffer = bytearray(size + 1)
    try:
        got = os.preadv(fd, [buffer], 0, _RWF_NOWAIT)
    except OSError:  # EAGAIN (not cached), EOPNOTSUPP (this file system cannot tell)
        return None
    if got != size:
        return None
    return bytes(buffer[:size])


_RWF_NOWAIT: int = getattr(os, "RWF_NOWAIT", 0)


def _read_open(
    ctx: ToolContext,
    resolved: ResolvedPath,
    fd: int,
    st: os.stat_result,
    offset: int,
    limit: int,
    budget: int,
    data: bytes | None = None,
) -> TextFile | ImageFile:
    """Read what the page needs from a regular file the resolver opened.

    A file above ``STREAM_THRESHOLD`` is decoded and paged as a stream
    (:func:`airlock.daemon.text.page_stream`), so the memory a read costs is
    the page it returns plus a constant, not a multiple of the file. ``data``:
    the whole file, already read (:func:`read_cached`).
    """
    display = resolved.display
    size = len(data) if data is not None else st.st_size
    image_limit = ctx.config.max_image_bytes
    text_limit = ctx.config.max_text_bytes
    small = size <= STREAM_THRESHOLD
    # A small file is read at once and sniffed from memory; above the threshold
    # the head decides what it is before anything big is read.
    if data is None and small:
        data = read_all(fd, size)
    head = data[:16] if data is not None else os.pread(fd, 16, 0)
    mime = sniff_image(head)
    if mime is not None:
        if size > image_limit:
            raise TooLarge(
                f"{display} is a {size}-byte image, over the {image_limit}-byte limit for images",
                {"path": display, "bytes": size},
            )
        if data is None:
            data = read_all(fd, size)
        return ImageFile(
            path=display,
            mime=mime,
            data_base64=base64.b64encode(data).decode(),
            bytes=len(data),
        )
    if size > text_limit:
        raise TooLarge(
            f"{display} is {size} bytes, over the {text_limit}-byte limit; "
            "read part of it with exec (e.g. head -c)",
            {"path": display, "bytes": size, "limit": text_limit},
        )
    if data is None:
        page = page_stream(fd, display, offset, limit, budget)
        return _page_result(display, page)
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
    final_newline = text.endswith("\n")
    if offset == 1 and text:
        # The usual call reads a whole small file: when every line fits, the page is
        # the text itself, so skip splitting it (same answer as the general path).
        total = text.count("\n") + (0 if final_newline else 1)
        if total <= limit and len(text) + (0 if final_newline else 1) <= budget:
            return TextFile(
                path=display,
                content=text,
                start_line=1,
                end_line=total,
                total_lines=total,
                next_offset=None,
                truncated=False,
                line_ending=line_ending,
                bom=bom,
            )
    lines = split_lines(text)
    total = len(lines)
    common = {"path": display, "total_lines": total, "line_ending": line_ending, "bom": bom}
    if total == 0 or offset > total:
        check_offset(offset, total, display)
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
    # Take lines while their cost (length + newline) fits the budget; the first line
    # always fits here. Costs are positive, so the running total is sorted and the
    # cut is a bisection instead of a Python loop over every line.
    window = lines[start : min(total, start + limit)]
    lengths = list(accumulate(map(len, window)))
    taken = bisect_right(range(len(window)), budget, key=lambda i: lengths[i] + i + 1)
    end = start + max(1, taken)
    chunk = window[: end - start]
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


async def _to_thread(fn: Callable[[], T]) -> T:
    return await asyncio.to_thread(fn)


async def file_read(
    ctx: ToolContext, req: FileReadInput, offload: Offload = _to_thread
) -> TextFile | ImageFile:
    """Resolve and read in one hop off the loop; ``offload`` is the workspace's thread hop.

    A small file whose lookup and bytes are all cached is answered at once instead
    (:func:`read_cached`): the hop costs more than the read.
    """
    if not req.granted_paths and _RWF_NOWAIT:
        cached = read_cached(ctx, req.path, req.offset, req.limit, req.budget_chars)
        if cached is not None:
            return cached
    return await offload(
        partial(
            _resolve_and_read,
            ctx,
            req.path,
            req.granted_paths,
            req.offset,
            req.limit,
            req.budget_chars,
        )
    )


async def file_multi_read(
    ctx: ToolContext, req: FileMultiReadInput, offload: Offload = _to_thread
) -> FileMultiReadOutput:
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
            result = await offload(
                partial(_resolve_and_read, ctx, raw, req.granted_paths, 1, 100000, remaining)
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


def _page_result(display: str, page: StreamPage) -> TextFile:
    """The ``TextFile`` for a streamed page (same fields ``page_text`` fills)."""
    common = {
        "path": display,
        "total_lines": page.total_lines,
        "line_ending": page.line_ending,
        "bom": page.bom,
    }
    if page.line_truncated:
        return TextFile(
            content=page.content,
            start_line=page.start_line,
            end_line=page.end_line,
            next_offset=page.next_offset,
            truncated=True,
            line_truncated=True,
            message=(
                f"line {page.start_line} is {page.first_line_length} characters, longer than "
                f"budget_chars={len(page.content)}; only its start is shown and the rest of "
                "this line cannot be paged by line offset: read it with exec and a byte range "
                "(e.g. cut -c or dd)"
            ),
            **common,
        )
    return TextFile(
        content=page.content,
        start_line=page.start_line,
        end_line=page.end_line,
        next_offset=page.next_offset,
        truncated=page.truncated,
        **common,
    )
