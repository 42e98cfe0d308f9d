"""Place every chunk of one Update in the file's current lines, in memory.

Rules (docs/apply-patch.md): a cursor that only moves forward; hints first
(stacked ``@@`` lines, each a trimmed starts-with through the same passes);
then the old lines through the four passes of :mod:`airlock.daemon.matching`,
the first pass with any match winning; more than one match with nothing to
choose between them is refused rather than guessed. Every failure is
collected so one error can name them all.

Context lines keep the file's own text (so a typographic or whitespace-loose
match never rewrites lines the patch did not mean to change); when a loose
pass matched with one consistent indentation offset, added lines are shifted
by it, the way ``file_patch`` re-indents.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from ..matching import (
    LINE_PASSES,
    NORMALISERS,
    LineIndex,
    MatchPass,
    apply_shift,
    fold_typography,
    indent_shift,
)
from .parser import Chunk

HINT_PASSES = (MatchPass.EXACT, MatchPass.TYPOGRAPHIC)  # starts-with already trims
MAX_SHOWN_LINES = 20
MAX_DETAILED_FAILURES = 10  # per file; later failures are listed without an excerpt
FUZZY_WINDOW = 500  # lines either side of the cursor searched by the fuzzy fallback
_EXACT = MatchPass.EXACT
FailureCode = Literal["hunk_not_found", "ambiguous_match"]


@dataclass(frozen=True)
class ChunkFailure:
    code: FailureCode
    message: str
    details: dict[str, object] = field(default_factory=dict)


class Edit(NamedTuple):
    start: int
    length: int
    lines: list[str]


@dataclass
class ChunkResult:
    lines: list[str]
    failures: list[ChunkFailure]
    passes: list[MatchPass]


def _replacement(
    chunk_lines: Sequence[tuple[str, str]],
    file_lines: Sequence[str],
    start: int,
    match_pass: MatchPass,
) -> list[str]:
    """The lines replacing the matched span: file text for context, patch text for additions."""
    offset = None
    if match_pass in (MatchPass.INDENTATION, MatchPass.TYPOGRAPHIC):
        old = [text for tag, text in chunk_lines if tag != "+"]
        offset = indent_shift(old, file_lines[start : start + len(old)])
    out: list[str] = []
    i = start
    for tag, text in chunk_lines:
        if tag == " ":
            out.append(file_lines[i])
            i += 1
        elif tag == "-":
            i += 1
        else:
            moved = apply_shift(text, offset) if offset is not None else None
            out.append(text if moved is None else moved)
    return out


def _show(lines: Sequence[str], prefix: str) -> str:
    shown = [f"{prefix}{x}" for x in lines[:MAX_SHOWN_LINES]]
    if len(lines) > MAX_SHOWN_LINES:
        shown.append(f"... ({len(lines) - MAX_SHOWN_LINES} more lines)")
    return "\n".join(shown)


class ChunkPlacer:
    """Places one file's chunks; build once per file, call :meth:`place` once."""

    def __init__(self, lines: list[str], display: str) -> None:
        self.lines = lines
        self.display = display
        self.index = LineIndex(lines)
        self._folded_positions: dict[str, list[int]] | None = None
        self._joined: dict[MatchPass, tuple[str, list[int]]] = {}

    def _closest(self, needle: Sequence[str], pos: int, context: int = 2) -> str:
        """Numbered current lines most like ``needle``, cheap even for many failures.

        Like :func:`airlock.daemon.matching.closest_excerpt` (windows voted by
        how many needle lines they hold, whitespace and typography folded), but
        sharing one position table across a file's failures, preferring
        windows near the cursor, and limiting the fuzzy fallback to lines
        around the cursor, so a wholly wrong 500-chunk patch fails in well
        under a second instead of half a minute.
        """
        lines = self.lines
        if not lines:
            return "(the file is empty)"
        folded = self.index.normalised(MatchPass.TYPOGRAPHIC)
        if self._folded_positions is None:
            table: dict[str, list[int]] = {}
            for i, line in enumerate(folded):
                table.setdefault(line, []).append(i)
            self._folded_positions = table
        wanted = [fold_typography(x).strip() for x in needle if x.strip()]
        votes: dict[int, int] = {}
        for k, line in enumerate(wanted):
            for i in self._folded_positions.get(line, [])[:200]:
                start = max(0, i - k)
                votes[start] = votes.get(start, 0) + 1
        if votes:
            best = max(votes, key=lambda s: (votes[s], -abs(s - pos)))
        else:
            best = min(pos, len(lines) - 1)
            if wanted:
                lo = max(0, pos - FUZZY_WINDOW)
                window = folded[lo : pos + FUZZY_WINDOW]
                close = difflib.get_close_matches(wanted[0], window, n=1, cutoff=0.3)
                if close:
                    best = lo + window.index(close[0])
        first = max(0, best - context)
        last = min(len(lines), best + max(len(needle), 1) + context)
        width = len(str(last))
        return "\n".join(f"{n + 1:>{width}} | {lines[n]}" for n in range(first, last))

    def _seek_hint(self, hint: str, start: int) -> int | None:
        for match_pass in HINT_PASSES:
            if not self._text_has(hint, start, match_pass):
                continue
            found = self.index.line_starts_with(hint, start, match_pass)
            if found is not None:
                return found
        return None

    def _text_has(self, hint: str, start: int, match_pass: MatchPass) -> bool:
        """Whether the hint occurs at all from line ``start`` on: one C-level search.

        ``line_starts_with`` scans line by line in Python; a hint that is not
        in the file would cost a full scan per pass, per chunk (seconds for
        500 wrong hints on a 50,000-line file). A line can only start with the
        hint if the text from that line on contains it.
        """
        cached = self._joined.get(match_pass)
        if cached is None:
            normalised = self.index.normalised(match_pass)
            offsets = [0] * (len(normalised) + 1)
            total = 0
            for i, line in enumerate(normalised):
                offsets[i] = total
                total += len(line) + 1
            offsets[len(normalised)] = total
            cached = ("\n".join(normalised), offsets)
            self._joined[match_pass] = cached
        joined, offsets = cached
        if start >= len(offsets):
            return False
        wanted = NORMALISERS[match_pass](hint).strip()
        return joined.find(wanted, offsets[start]) != -1

    def _label(self, number: int, chunk: Chunk) -> str:
        return f"{self.display}: chunk {number} (patch line {chunk.line_number})"

    def place(self, chunks: Sequence[Chunk]) -> ChunkResult:
        edits: list[Edit] = []
        failures: list[ChunkFailure] = []
        passes: list[MatchPass] = []
        cursor = 0
        self.index.expect_searches(len(chunks))
        for number, chunk in enumerate(chunks, 1):
            pos = cursor
            hint_line: int | None = None
            missing_hint: str | None = None
            for hint in chunk.hints:
                found_hint = self._seek_hint(hint, pos)
                if found_hint is None:
                    missing_hint = hint
                    break
                hint_line = found_hint
                pos = found_hint + 1
            if missing_hint is not None:
                failures.append(
                    self._hint_failure(
                        self._label(number, chunk),
                        number,
                        missing_hint,
                        pos,
                        len(failures) < MAX_DETAILED_FAILURES,
                    )
                )
                continue
            chunk_lines = chunk.lines
            old = [text for tag, text in chunk_lines if tag != "+"]
            match_pass: MatchPass | None = None
            found: list[int] = []
            # Models often repeat the hint line as the chunk's first context line;
            # the chunk may then start on the hint line itself.
            starts = (pos,) if hint_line is None else (pos, hint_line)
            if old:
                match_pass, found = self._locate_from(chunk, old, starts)
                if not found and chunk_lines[-1] == (" ", ""):
                    # A blank line closing a chunk is as often a separator as context.
                    chunk_lines = chunk_lines[:-1]
                    old.pop()
                    if old:
                        match_pass, found = self._locate_from(chunk, old, starts)
            if not old:
                at = self._insertion_point(chunk, hint_line, pos)
                edits.append(Edit(at, 0, [text for _, text in chunk_lines]))
                if hint_line is not None or chunk.range_start is not None:
                    cursor = at
                continue
            if not found or match_pass is None:
                failures.append(
                    self._not_found(
                        self._label(number, chunk),
                        number,
                        chunk,
                        old,
                        pos,
                        len(failures) < MAX_DETAILED_FAILURES,
                    )
                )
                continue
            start = found[0]
            if len(found) > 1 and hint_line is None:
                chosen = self._tie_break(chunk, found)
                if chosen is None:
                    failures.append(
                        self._ambiguous(self._label(number, chunk), number, old, found, match_pass)
                    )
                    continue
                start = chosen
            passes.append(match_pass)
            if match_pass is _EXACT:
                # Context lines equal the file's own lines: the new side is the replacement.
                replacement = [text for tag, text in chunk_lines if tag != "-"]
            else:
                replacement = _replacement(chunk_lines, self.lines, start, match_pass)
            edits.append(Edit(start, len(old), replacement))
            cursor = start + len(old)
        if failures:
            return ChunkResult([], failures, passes)
        return ChunkResult(self._apply(edits), [], passes)

    def _insertion_point(self, chunk: Chunk, hint_line: int | None, pos: int) -> int:
        if chunk.end_of_file:
            return len(self.lines)
        if hint_line is not None:
            return hint_line + 1
        if chunk.range_start is not None:
            # Unified diff: "-N,0" inserts after line N; otherwise before line N.
            at = chunk.range_start if chunk.range_count == 0 else chunk.range_start - 1
            return min(max(at, pos), len(self.lines))
        return len(self.lines)

    def _locate_from(
        self, chunk: Chunk, old: Sequence[str], starts: Sequence[int]
    ) -> tuple[MatchPass | None, list[int]]:
        """The first start (cursor, then hint line) where ``old`` is found, through the passes."""
        find = self.index.find_first_pass
        for pos in starts:
            if chunk.end_of_file:
                at = len(self.lines) - len(old)
                if at < pos:
                    continue
                match_pass, found = find(old, at, at, LINE_PASSES)
            else:
                match_pass, found = find(old, pos, None, LINE_PASSES)
            if found:
                return match_pass, found
        return None, []

    @staticmethod
    def _tie_break(chunk: Chunk, found: list[int]) -> int | None:
        """A unified range header's old start picks the nearest candidate, if unique."""
        if chunk.range_start is None:
            return None
        want = chunk.range_start - 1
        ranked = sorted(found, key=lambda p: abs(p - want))
        if abs(ranked[0] - want) == abs(ranked[1] - want):
            return None
        return ranked[0]

    def _apply(self, edits: list[Edit]) -> list[str]:
        edits.sort(key=lambda e: e.start)  # stable: EOF insertions keep patch order
        out: list[str] = []
        prev = 0
        for edit in edits:
            out.extend(self.lines[prev : edit.start])
            out.extend(edit.lines)
            prev = max(prev, edit.start + edit.length)
        out.extend(self.lines[prev:])
        return out

    # ------------------------------------------------------------ failure messages

    def _excerpt(self, needle: Sequence[str], pos: int, detailed: bool) -> str:
        if not detailed:
            return f"(not shown: more than {MAX_DETAILED_FAILURES} chunks of this file failed)"
        return self._closest(needle, pos)

    def _hint_failure(
        self, label: str, chunk_number: int, hint: str, pos: int, detailed: bool
    ) -> ChunkFailure:
        excerpt = self._excerpt([hint], pos, detailed)
        return ChunkFailure(
            "hunk_not_found",
            f"{label}: the context hint '@@ {hint}' matches no line at or after line "
            f"{pos + 1}. The closest current lines are:\n{excerpt}\n"
            "Next: re-read the file and rewrite only this hunk.",
            {
                "path": self.display,
                "chunk": chunk_number,
                "hint": hint,
                "closest": excerpt,
            },
        )

    def _not_found(
        self,
        label: str,
        chunk_number: int,
        chunk: Chunk,
        old: Sequence[str],
        pos: int,
        detailed: bool,
    ) -> ChunkFailure:
        excerpt = self._excerpt(old, pos, detailed)
        where = " at the end of the file" if chunk.end_of_file else ""
        after = f" at or after line {pos + 1}" if pos and not chunk.end_of_file else ""
        return ChunkFailure(
            "hunk_not_found",
            f"{label}: these lines were not found{where}{after}:\n{_show(old, '  ')}\n"
            f"The closest current lines are:\n{excerpt}\n"
            "Next: re-read the file and rewrite only this hunk.",
            {
                "path": self.display,
                "chunk": chunk_number,
                "expected": list(old[:MAX_SHOWN_LINES]),
                "closest": excerpt,
            },
        )

    def _ambiguous(
        self,
        label: str,
        chunk_number: int,
        old: Sequence[str],
        found: list[int],
        match_pass: MatchPass,
    ) -> ChunkFailure:
        numbers = [p + 1 for p in found]
        how = "" if match_pass is MatchPass.EXACT else f" (compared {match_pass.value})"
        return ChunkFailure(
            "ambiguous_match",
            f"{label}: these lines match {len(found)} places{how}, at lines "
            f"{', '.join(map(str, numbers[:50]))}:\n{_show(old, '  ')}\n"
            "Add an '@@ <line that starts the enclosing function or class>' hint or more "
            "context lines so the chunk matches one place; re-read the file and rewrite only "
            "this hunk.",
            {"path": self.display, "chunk": chunk_number, "lines": numbers},
        )
