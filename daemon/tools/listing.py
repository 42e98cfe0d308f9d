"""``file_list``: a sorted tree to ``depth``, honest about what it left out.

The walk (``airlock.daemon.search.walk``) never follows a symlink, so a link
to ``/etc`` is listed as a symlink and nothing behind it is read; the ``path``
argument itself goes through the shared resolver, so a symlinked directory
pointing out of the workspace is ``path_escape``. Ignore rules are evaluated
in Python (the same semantics rg applies, inside or outside a git work tree)
because a bounded listing should read only the directories it shows, which
``git ls-files`` or ``rg --files`` over the whole tree would not.
"""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path
from typing import Literal

from ..context import ToolContext
from ..paths import ResolvedPath, check_regular, lstat_existing
from ..protocol import FileListInput, FileListOutput, ListEntry
from ..search.ignore import stack_for, why_ignored
from ..search.walk import WalkStats, walk


async def file_list(ctx: ToolContext, req: FileListInput) -> FileListOutput:
    target = ctx.resolve(req.path, intent="read", granted=req.granted_paths)
    return await asyncio.to_thread(_list, ctx, target, req)


def _list(ctx: ToolContext, target: ResolvedPath, req: FileListInput) -> FileListOutput:
    """Everything is read through fds the resolver opened: the target's parent (to see
    what the target is, without following it) and the root (walk and ignore files)."""
    st = lstat_existing(ctx.roots, target, "list its parent directory to see what is there")
    if not stat.S_ISDIR(st.st_mode):
        if not stat.S_ISLNK(st.st_mode):
            check_regular(st, target.display)  # a FIFO, socket or device: invalid_request
        kind: Literal["file", "symlink"] = "file" if stat.S_ISREG(st.st_mode) else "symlink"
        size = st.st_size if kind == "file" else None
        return FileListOutput(
            entries=[ListEntry(path=target.display, type=kind, size=size)], truncated=False
        )
    root = target.root
    rel = target.relative.as_posix()
    rel = "" if rel == "." else rel
    with ctx.roots.root_dir(root) as root_fd, ctx.roots.directory(target) as start_fd:
        return _list_dir(ctx, target, req, root, rel, root_fd, start_fd)


def _list_dir(
    ctx: ToolContext,
    target: ResolvedPath,
    req: FileListInput,
    root: Path,
    rel: str,
    root_fd: int,
    start_fd: int,
) -> FileListOutput:
    ignore = None if req.include_ignored else stack_for(root, rel, root_fd)
    stats = WalkStats()
    entries: list[ListEntry] = []
    for entry in walk(
        root,
        rel,
        max_depth=req.depth,
        include_hidden=req.include_hidden,
        ignore=ignore,
        stats=stats,
        start_fd=start_fd,
    ):
        if entry.kind == "other":
            continue
        entries.append(
            ListEntry(
                path=printable(ctx.roots.display(root / entry.rel)),
                type=entry.kind,
                size=entry.size,
            )
        )
        if len(entries) > req.limit:
            break
    truncated = len(entries) > req.limit
    notes: list[str] = []
    if truncated:
        notes.append(
            f"Listing cut at limit={req.limit}; list a subdirectory, lower depth, or raise limit."
        )
    if stats.too_deep:
        notes.append(
            "Directories nested deeper than the walk's limit were not entered; list a deeper "
            "directory directly."
        )
    if not req.include_ignored:
        notes.extend(_ignore_notes(root, rel, stats, root_fd))
    return FileListOutput(
        entries=entries[: req.limit], truncated=truncated, note=" ".join(notes) or None
    )


def printable(path: str) -> str:
    """A file name that is not UTF-8 (kept by Python as surrogate escapes) shown with
    U+FFFD, so the response can always be encoded as JSON."""
    return path.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


def _ignore_notes(root: Path, rel: str, stats: WalkStats, root_fd: int) -> list[str]:
    notes: list[str] = []
    hidden = why_ignored(root, rel, root_fd)
    if hidden is not None:
        notes.append(
            f"{hidden.path} is ignored by {hidden.rule.source} ({hidden.rule.line!r}); listed "
            "because you named it, but ignore rules inside it still apply; pass "
            "include_ignored=true to see everything."
        )
    if stats.ignored:
        examples = ", ".join(stats.ignored_examples or [])
        noun = "entry" if stats.ignored == 1 else "entries"
        notes.append(
            f"{stats.ignored} {noun} hidden by .gitignore rules (e.g. {examples}); pass "
            "include_ignored=true to list them."
        )
    return notes
