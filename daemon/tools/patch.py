"""``file_patch``, ``file_multi_patch`` and ``file_diff_preview``.

One pure function, :func:`replace_in_text`, does the matching for all three,
so a preview is exactly what a multi-patch would write.
"""

from __future__ import annotations

import asyncio
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..context import ToolContext
from ..diffs import unified_diff, unified_diff_async
from ..errors import (
    AirlockError,
    AmbiguousMatch,
    HunkNotFound,
    InvalidRequest,
    StaleWrite,
)
from ..fsio import PlannedWrite, read_file_bytes, refuse_read_only, sha256_hex
from ..matching import (
    LineIndex,
    MatchPass,
    apply_shift,
    closest_excerpt,
    indent_shift,
    trim_blank_edges,
)
from ..offload import run_cpu
from ..paths import ResolvedPath
from ..protocol import (
    FileDiffPreviewInput,
    FileDiffPreviewOutput,
    FileMultiPatchInput,
    FileMultiPatchOutput,
    FilePatchInput,
    FilePatchOutput,
    MatchKind,
    PatchedFile,
    PatchEdit,
    PreviewFile,
)
from ..text import DecodedText, decode, split_lines
from .editing import editing, write_all


@dataclass(frozen=True)
class Replacement:
    text: str
    replacements: int
    match: MatchKind


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _reindent(old_lines: list[str], matched: list[str], new_lines: list[str]) -> list[str] | None:
    """``new_lines`` moved by the single indentation shift between ``old_lines`` and ``matched``."""
    shift = indent_shift(old_lines, matched)
    if shift is None:
        return None
    shifted: list[str] = []
    for line in new_lines:
        moved = apply_shift(line, shift)
        if moved is None:
            return None
        shifted.append(moved)
    return shifted


def replace_in_text(
    text: str, old: str, new: str, *, replace_all: bool, display: str
) -> Replacement:
    """Apply one old/new edit to LF text through the three matching tiers."""
    old = old.replace("\r\n", "\n")
    new = new.replace("\r\n", "\n")
    if old == "":
        raise InvalidRequest(
            "old_string is empty; to create or overwrite a file use file_write, to insert "
            "text include a neighbouring line in old_string and new_string"
        )
    if old == new:
        raise InvalidRequest("old_string and new_string are identical; nothing would change")
    count = text.count(old)
    if count:
        if count > 1 and not replace_all:
            lines, pos = [], text.find(old)
            while pos != -1:
                lines.append(_line_of(text, pos))
                pos = text.find(old, pos + len(old))
            raise AmbiguousMatch(
                f"old_string matches {count} places in {display} (lines "
                f"{', '.join(map(str, lines))}); add surrounding lines to old_string to make it "
                "unique, or set replace_all",
                {"path": display, "lines": lines},
            )
        return Replacement(text.replace(old, new), count, "exact")

    file_lines = split_lines(text)
    final_newline = text.endswith("\n")
    old_lines = split_lines(old)
    new_lines = split_lines(new)
    index = LineIndex(file_lines)
    for match_pass, kind in (
        (MatchPass.TRAILING_WHITESPACE, "trailing_whitespace"),
        (MatchPass.INDENTATION, "indentation"),
    ):
        found = index.find(old_lines, match_pass)
        starts: list[int] = []
        for p in found:  # non-overlapping, first wins
            if not starts or p >= starts[-1] + len(old_lines):
                starts.append(p)
        if not starts:
            continue
        if len(starts) > 1 and not replace_all:
            numbers = [p + 1 for p in starts]
            raise AmbiguousMatch(
                f"old_string matches {len(starts)} places in {display} when whitespace is "
                f"ignored (lines {', '.join(map(str, numbers))}); add surrounding lines to make "
                "it unique, or set replace_all",
                {"path": display, "lines": numbers},
            )
        result = list(file_lines)
        for p in reversed(starts):
            matched = file_lines[p : p + len(old_lines)]
            replacement = new_lines
            if match_pass is MatchPass.INDENTATION:
                shifted = _reindent(old_lines, matched, new_lines)
                if shifted is None:
                    raise HunkNotFound(
                        f"old_string matches line {p + 1} of {display} only with different "
                        "indentation, and no single indentation offset maps it onto the file; "
                        "re-read the file and copy the lines exactly",
                        {"path": display, "line": p + 1},
                    )
                replacement = shifted
            result[p : p + len(old_lines)] = replacement
        joined = "\n".join(result)
        if final_newline and result:
            joined += "\n"
        return Replacement(joined, len(starts), kind)  # type: ignore[arg-type]

    trimmed = trim_blank_edges(old, new)  # the last tier: stray blank edge lines
    if trimmed is not None:
        try:
            found_trimmed = replace_in_text(
                text, trimmed[0], trimmed[1], replace_all=replace_all, display=display
            )
        except (HunkNotFound, InvalidRequest):
            pass
        else:
            return Replacement(found_trimmed.text, found_trimmed.replacements, "blank_lines")
    excerpt = closest_excerpt(file_lines, old_lines)
    raise HunkNotFound(
        f"old_string was not found in {display}. The closest current lines are:\n{excerpt}\n"
        "Re-read the file and copy old_string exactly from it.",
        {"path": display, "closest": excerpt},
    )


@dataclass
class FilePlan:
    """One file's in-memory edit: original bytes, decoded form and new text."""

    resolved: ResolvedPath
    original: bytes
    decoded: DecodedText
    text: str
    mode: int  # read with the file, so writing needs no stat on the event loop
    replacements: int = 0
    matches: list[MatchKind] = field(default_factory=list)

    @property
    def new_bytes(self) -> bytes:
        return self.decoded.encode(self.text)

    def diff(self) -> str:
        return unified_diff(self.resolved.display, self.decoded.text, self.text)

    async def diff_off_loop(self) -> str:
        """The diff on a worker thread (it may take up to its budget; the loop stays free)."""
        return await unified_diff_async(self.resolved.display, self.decoded.text, self.text)

    def planned_write(self) -> PlannedWrite:
        return PlannedWrite(
            self.resolved,
            before=self.original,
            after=self.new_bytes,
            display=self.resolved.display,
            mode=self.mode,
            create_dirs=False,
        )


def load_plan(ctx: ToolContext, resolved: ResolvedPath, *, editing: bool = True) -> FilePlan:
    """The file read through the resolver; ``editing`` refuses a read-only file up front."""
    data, st = read_file_bytes(ctx.roots, resolved, max_bytes=ctx.config.max_text_bytes)
    if editing:
        refuse_read_only(st, resolved.display)
    decoded = decode(data, path=resolved.display)
    mode = stat.S_IMODE(st.st_mode) & 0o777
    return FilePlan(resolved=resolved, original=data, decoded=decoded, text=decoded.text, mode=mode)


def plan_edits(
    ctx: ToolContext, edits: list[PatchEdit], granted: list[str], *, editing: bool = True
) -> list[FilePlan]:
    """Every edit applied in memory, in order; the first failure names its index."""
    plans: dict[Path, FilePlan] = {}
    for i, edit in enumerate(edits):
        try:
            resolved = ctx.resolve(edit.path, intent="write", granted=granted)
            plan = plans.get(resolved.real)
            if plan is None:
                plan = load_plan(ctx, resolved, editing=editing)
                plans[resolved.real] = plan
            result = replace_in_text(
                plan.text,
                edit.old_string,
                edit.new_string,
                replace_all=edit.replace_all,
                display=resolved.display,
            )
        except AirlockError as exc:
            exc.message = f"edit {i} ({edit.path}): {exc.message} Nothing was written."
            exc.details = {**exc.details, "index": i, "path": edit.path}
            raise
        plan.text = result.text
        plan.replacements += result.replacements
        plan.matches.append(result.match)
    return list(plans.values())


async def plan_in_thread(
    ctx: ToolContext, edits: list[PatchEdit], granted: list[str], *, editing: bool = True
) -> list[FilePlan]:
    """Reading and matching every edit, on the shared CPU pool (matching is the heavy part)."""
    return await run_cpu(lambda: plan_edits(ctx, edits, granted, editing=editing))


# ---------------------------------------------------------------- the tools


async def file_patch(ctx: ToolContext, req: FilePatchInput) -> FilePatchOutput:
    resolved = ctx.resolve(req.path, intent="write", granted=req.granted_paths)
    async with editing(ctx, [resolved], diagnostics=req.diagnostics) as tracker:
        plan = await asyncio.to_thread(load_plan, ctx, resolved)
        if req.expected_sha256 is not None and sha256_hex(plan.original) != req.expected_sha256:
            raise StaleWrite(
                f"{resolved.display} no longer has sha256 {req.expected_sha256}; re-read it and "
                "retry. Nothing was written.",
                {"path": resolved.display, "sha256": sha256_hex(plan.original)},
            )
        text = plan.text
        result = await run_cpu(
            lambda: replace_in_text(
                text,
                req.old_string,
                req.new_string,
                replace_all=req.replace_all,
                display=resolved.display,
            )
        )
        plan.text = result.text
        new_bytes = plan.new_bytes
        await write_all(ctx, tracker, [plan.planned_write()], [resolved])
        found, skipped = await tracker.finish()
    return FilePatchOutput(
        path=resolved.display,
        replacements=result.replacements,
        match=result.match,
        sha256=sha256_hex(new_bytes),
        diff=await plan.diff_off_loop(),
        diagnostics=found,
        diagnostics_skipped=skipped,
    )


def _resolve_edits(
    ctx: ToolContext, edits: list[PatchEdit], granted: list[str]
) -> list[ResolvedPath]:
    resolved: list[ResolvedPath] = []
    for i, edit in enumerate(edits):
        try:
            resolved.append(ctx.resolve(edit.path, intent="write", granted=granted))
        except AirlockError as exc:
            exc.message = f"edit {i} ({edit.path}): {exc.message} Nothing was written."
            exc.details = {**exc.details, "index": i, "path": edit.path}
            raise
    return resolved


async def file_multi_patch(ctx: ToolContext, req: FileMultiPatchInput) -> FileMultiPatchOutput:
    resolved = _resolve_edits(ctx, req.edits, req.granted_paths)
    unique = list({r.real: r for r in resolved}.values())
    async with editing(ctx, unique, diagnostics=req.diagnostics) as tracker:
        plans = await plan_in_thread(ctx, req.edits, req.granted_paths)
        writes = [p.planned_write() for p in plans]
        await write_all(ctx, tracker, writes, unique)
        found, skipped = await tracker.finish()
    return FileMultiPatchOutput(
        files=[
            PatchedFile(
                path=p.resolved.display,
                replacements=p.replacements,
                sha256=sha256_hex(w.after or b""),
                diff=await p.diff_off_loop(),
            )
            for p, w in zip(plans, writes, strict=True)
        ],
        diagnostics=found,
        diagnostics_skipped=skipped,
    )


async def file_diff_preview(ctx: ToolContext, req: FileDiffPreviewInput) -> FileDiffPreviewOutput:
    plans = await plan_in_thread(ctx, req.edits, req.granted_paths, editing=False)
    return FileDiffPreviewOutput(
        files=[PreviewFile(path=p.resolved.display, diff=await p.diff_off_loop()) for p in plans]
    )
