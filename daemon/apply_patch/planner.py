"""Turn parsed operations into planned writes, entirely in memory.

Two steps, because locks need real paths before anything is read:

* :func:`resolve_operations` resolves every path through the one resolver
  (and keeps it inside the patch root), and refuses two operations on one
  real file (a symlinked alias counts);
* :func:`plan_changes`, run under the locks, reads each file, places every
  chunk, and produces the exact bytes to write, or one error that lists every
  failure at once, so a model can fix the whole patch in one round trip.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..context import ToolContext
from ..errors import (
    AirlockError,
    AmbiguousMatch,
    BinaryFile,
    Conflict,
    GeneratedFile,
    HunkNotFound,
    InvalidRequest,
    IsDirectory,
    NotFound,
    PatchParseError,
    PathEscape,
    ReadOnly,
    TooLarge,
)
from ..fsio import PlannedWrite, read_file_bytes, refuse_read_only
from ..paths import ResolvedPath
from ..text import decode, split_lines
from .matcher import ChunkPlacer
from .parser import AddFile, DeleteFile, Operation, UpdateFile

MAX_LISTED_FAILURES = 30  # in the message; details.failures has every one
OperationName = Literal["add", "update", "move", "delete"]

# When failures of several kinds are collected, the error's code is the first
# kind present in this order: a path problem masks everything after it.
PRECEDENCE: tuple[type[AirlockError], ...] = (
    PathEscape,
    GeneratedFile,
    ReadOnly,
    PatchParseError,
    NotFound,
    IsDirectory,
    Conflict,
    BinaryFile,
    TooLarge,
    HunkNotFound,
    AmbiguousMatch,
)


@dataclass(frozen=True)
class ResolvedOperation:
    op: Operation
    path: ResolvedPath
    move_to: ResolvedPath | None  # None also when the move target is the file itself
    lexical: Path  # root / relative path, symlinks not followed


@dataclass
class PlannedChange:
    operation: OperationName
    path: ResolvedPath
    previous: ResolvedPath | None
    writes: list[PlannedWrite] = field(default_factory=list)


def combine(errors: Sequence[AirlockError]) -> AirlockError:
    """One error for every failure: the highest-precedence code, every message numbered."""
    if len(errors) == 1:
        only = errors[0]
        only.message = f"{only.message} Nothing was written."
        return only
    rank = {cls: i for i, cls in enumerate(PRECEDENCE)}
    lead = min(errors, key=lambda e: rank.get(type(e), len(rank)))
    shown = errors[:MAX_LISTED_FAILURES]
    body = "\n\n".join(f"{i}. {e.message}" for i, e in enumerate(shown, 1))
    if len(errors) > len(shown):
        body += f"\n\n... and {len(errors) - len(shown)} more (details.failures lists them)."
    return type(lead)(
        f"The patch has {len(errors)} problems; nothing was written.\n\n{body}",
        {"failures": [{"code": str(e.code), "message": e.message, **e.details} for e in errors]},
    )


def _resolve_in_root(
    ctx: ToolContext, root: ResolvedPath, rel: str, granted: Sequence[str]
) -> ResolvedPath:
    resolved = ctx.resolve(str(root.real / rel), intent="write", granted=granted)
    if not resolved.real.is_relative_to(root.real):
        raise PathEscape(
            f"{rel!r} resolves to {resolved.real}, outside the patch root {root.display} "
            "(through a symlink); patch only files inside the root.",
            {"path": rel},
        )
    return resolved


def resolve_operations(
    ctx: ToolContext, root: ResolvedPath, ops: Sequence[Operation], granted: Sequence[str]
) -> list[ResolvedOperation]:
    errors: list[AirlockError] = []
    out: list[ResolvedOperation] = []
    owners: dict[Path, str] = {}
    for op in ops:
        try:
            path = _resolve_in_root(ctx, root, op.path, granted)
            move_to = None
            if isinstance(op, UpdateFile) and op.move_to is not None:
                dest = _resolve_in_root(ctx, root, op.move_to, granted)
                move_to = None if dest.real == path.real else dest
        except AirlockError as exc:
            errors.append(exc)
            continue
        for target, raw in ((path, op.path), (move_to, getattr(op, "move_to", None))):
            if target is None:
                continue
            if target.real in owners:
                errors.append(
                    PatchParseError(
                        f"{raw!r} and {owners[target.real]!r} are the same file "
                        f"({target.display}); two operations may not touch one file. "
                        "Combine them into one section.",
                        {"path": target.display},
                    )
                )
            owners[target.real] = str(raw)
        out.append(ResolvedOperation(op, path, move_to, root.real / op.path))
    if errors:
        raise combine(errors)
    return out


def _mode(st: os.stat_result) -> int:
    return stat.S_IMODE(st.st_mode) & 0o777


def _check_creatable(ctx: ToolContext, target: ResolvedPath, what: str) -> None:
    """Nothing at ``target``, and every existing ancestor a directory (asked through the
    resolver's fds, so a swapped directory cannot make this probe look outside)."""
    try:
        with ctx.roots.parent(target) as anchor:
            st = anchor.lstat()
    except NotFound:
        return  # missing directories are created by the write
    except InvalidRequest:
        raise Conflict(
            f"{target.display} cannot be created: a directory on its way is a file, not a "
            "directory.",
            {"path": target.display},
        ) from None
    if st is not None:
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a file"
        raise Conflict(
            f"{target.display} already exists ({kind}); {what} never overwrites. Update or "
            "delete it in a separate patch, or pick another path.",
            {"path": target.display},
        )


def _read(ctx: ToolContext, target: ResolvedPath) -> tuple[bytes, os.stat_result]:
    data, st = read_file_bytes(ctx.roots, target, max_bytes=ctx.config.max_text_bytes)
    refuse_read_only(st, target.display)
    return data, st


def _plan_add(ctx: ToolContext, op: AddFile, target: ResolvedPath) -> PlannedChange:
    _check_creatable(ctx, target, "Add File")
    text = "".join(f"{line}\n" for line in op.lines)
    write = PlannedWrite(target, before=None, after=text.encode("utf-8"), display=target.display)
    return PlannedChange("add", target, None, [write])


def _plan_delete(ctx: ToolContext, target: ResolvedPath, lexical: Path) -> PlannedChange:
    _refuse_symlink(lexical, "deleting it", target.display)
    data, st = _read(ctx, target)
    write = PlannedWrite(target, before=data, after=None, display=target.display, mode=_mode(st))
    return PlannedChange("delete", target, None, [write])


def _refuse_symlink(lexical: Path, what: str, display: str) -> None:
    """Deleting or moving away a symlink's *target* is never what was meant."""
    if os.path.islink(lexical):
        raise InvalidRequest(
            f"{display} is a symbolic link; {what} would act on the file it points to. Remove "
            "or rename the link itself with exec (rm / mv).",
            {"path": display},
        )


def _plan_update(
    ctx: ToolContext,
    op: UpdateFile,
    source: ResolvedPath,
    dest: ResolvedPath | None,
    lexical: Path,
) -> tuple[PlannedChange | None, list[AirlockError]]:
    if dest is not None:
        _refuse_symlink(lexical, "moving it", op.path)
    data, st = _read(ctx, source)
    if dest is not None:
        _check_creatable(ctx, dest, "Move to")
    if op.chunks:
        decoded = decode(data, path=source.display)
        result = ChunkPlacer(split_lines(decoded.text), source.display).place(op.chunks)
        if result.failures:
            return None, [
                (HunkNotFound if f.code == "hunk_not_found" else AmbiguousMatch)(
                    f.message, f.details
                )
                for f in result.failures
            ]
        # Codex's rule, which its fixtures pin: an updated file always ends with a newline.
        new_text = "\n".join(result.lines) + "\n" if result.lines else ""
        after = decoded.encode(new_text)
    else:
        after = data  # a bare Move to: the bytes move unchanged (binary files too)
    mode = _mode(st)
    if dest is None:
        writes: list[PlannedWrite] = []
        if after != data:
            writes.append(
                PlannedWrite(
                    source,
                    before=data,
                    after=after,
                    display=source.display,
                    mode=mode,
                    create_dirs=False,
                )
            )
        return PlannedChange("update", source, None, writes), []
    return (
        PlannedChange(
            "move",
            dest,
            source,
            [
                PlannedWrite(dest, before=None, after=after, display=dest.display, mode=mode),
                PlannedWrite(source, before=data, after=None, display=source.display, mode=mode),
            ],
        ),
        [],
    )


def plan_changes(ctx: ToolContext, ops: Sequence[ResolvedOperation]) -> list[PlannedChange]:
    """Every operation planned; raises one combined error if anything cannot apply."""
    errors: list[AirlockError] = []
    changes: list[PlannedChange] = []
    for item in ops:
        op = item.op
        try:
            if isinstance(op, AddFile):
                changes.append(_plan_add(ctx, op, item.path))
            elif isinstance(op, DeleteFile):
                changes.append(_plan_delete(ctx, item.path, item.lexical))
            else:
                change, failures = _plan_update(ctx, op, item.path, item.move_to, item.lexical)
                errors.extend(failures)
                if change is not None:
                    changes.append(change)
        except AirlockError as exc:
            exc.message = f"{_header(op)} (patch line {op.line_number}): {exc.message}"
            errors.append(exc)
    if errors:
        raise combine(errors)
    return changes


def _header(op: Operation) -> str:
    if isinstance(op, AddFile):
        return f"'*** Add File: {op.path}'"
    if isinstance(op, DeleteFile):
        return f"'*** Delete File: {op.path}'"
    return f"'*** Update File: {op.path}'"
