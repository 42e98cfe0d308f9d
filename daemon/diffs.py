"""Unified diffs of LF text, as every editing tool reports them, within a budget.

``difflib`` is quadratic in the worst case: one ``file_diff_preview`` of a
12k-line file of repetitive lines once held the event loop for 5 s. So a diff
here is computed patience-style (lines unique on both sides anchor the
match, so ordinary edits of large files are near-linear; difflib only sees
small gaps) and has two budgets, past which it degrades to a one-line summary
("file rewritten, N lines") instead of going quadratic:

- size: a changed region of more than ``max_lines`` lines is not compared,
  nor is a gap where one difflib pass would compare more than
  ``DIFF_MAX_WORK`` line pairs;
- time: a deadline, checked between ranges and at every difflib
  longest-match step (repetitive text without unique lines is where difflib
  goes quadratic); past ``budget_s`` the diff is abandoned.

Either way the edit itself is unaffected; only the report shrinks. Callers on
the event loop use :func:`unified_diff_async`, which runs the diff on a worker
thread, so even a diff within budget never stalls ``/v1/health``.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Iterator
from typing import Literal

from .anchors import anchors

DIFF_BUDGET_S = 2.0
DIFF_MAX_LINES = 200_000
# Line pairs one difflib pass may compare (a few tenths of a second of CPU).
DIFF_MAX_WORK = 1_000_000
CONTEXT_LINES = 3
# Below this many line pairs a gap goes straight to difflib (cheap at that size).
_SMALL_GAP = 40_000

Tag = Literal["replace", "delete", "insert", "equal"]
Opcode = tuple[str, int, int, int, int]


_TAGS: dict[str, Tag] = {
    "replace": "replace",
    "delete": "delete",
    "insert": "insert",
    "equal": "equal",
}


class _OverBudget(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _BudgetedMatcher(difflib.SequenceMatcher[str]):
    """``SequenceMatcher`` that gives up at a deadline (checked at every longest-match step)."""

    def __init__(self, a: list[str], b: list[str], deadline: float) -> None:
        self._deadline = deadline
        self._old = a
        super().__init__(None, a, b)

    def find_longest_match(
        self, alo: int = 0, ahi: int | None = None, blo: int = 0, bhi: int | None = None
    ) -> difflib.Match:
        if time.monotonic() > self._deadline:
            raise _OverBudget("time")
        return super().find_longest_match(alo, ahi, blo, bhi)

    def work(self) -> int:
        """Line pairs one longest-match pass compares: each line times its non-junk matches."""
        b2j: dict[str, list[int]] = self.b2j  # type: ignore[attr-defined]  # set by set_seq2
        return sum(len(b2j.get(line, ())) for line in self._old)


class _Grouper(difflib.SequenceMatcher[str]):
    """Only for ``get_grouped_opcodes``: hands it opcodes computed elsewhere."""

    def __init__(self, opcodes: list[Opcode]) -> None:
        super().__init__(None, [], [])
        self._ops = opcodes

    def get_opcodes(self) -> list[tuple[Tag, int, int, int, int]]:
        return [(_TAGS[op[0]], *op[1:]) for op in self._ops]


def unified_diff(
    display: str,
    before: str | None,
    after: str | None,
    *,
    budget_s: float = DIFF_BUDGET_S,
    max_lines: int = DIFF_MAX_LINES,
) -> str:
    """The unified diff from ``before`` to ``after`` (None: absent), or a summary past budget."""
    old = _lines(before)
    new = _lines(after)
    fromfile = f"a/{display}" if before is not None else "/dev/null"
    tofile = f"b/{display}" if after is not None else "/dev/null"
    try:
        ops = opcodes(old, new, deadline=time.monotonic() + budget_s, max_lines=max_lines)
        out: list[str] = []
        for line in _format(ops, old, new, fromfile, tofile):
            out.append(line)
            if not line.endswith("\n"):
                out.append("\n\\ No newline at end of file\n")
        return "".join(out)
    except _OverBudget as exc:
        return summary(display, old, new, exc.reason)


async def unified_diff_async(display: str, before: str | None, after: str | None) -> str:
    """:func:`unified_diff` on the shared CPU pool: the event loop never runs a diff, and
    many diffs at once never crowd it out (see :mod:`airlock.daemon.offload`)."""
    from .offload import run_cpu

    return await run_cpu(lambda: unified_diff(display, before, after))


def opcodes(a: list[str], b: list[str], *, deadline: float, max_lines: int) -> list[Opcode]:
    """Edit opcodes (difflib's shape), patience-style: unique common lines anchor the match.

    Each range is trimmed of its common head and tail; a small remainder goes
    to difflib; a large one is cut at the longest increasing run of lines that
    occur exactly once on each side, and every gap is treated the same way (an
    explicit stack, so no recursion limit). Only a large range without any
    unique common line reaches difflib at size, under the deadline.
    """
    out: list[Opcode] = []
    stack: list[Opcode] = [("diff", 0, len(a), 0, len(b))]
    while stack:
        task = stack.pop()
        kind, alo, ahi, blo, bhi = task
        if kind != "diff":
            _append(out, task)
            continue
        if time.monotonic() > deadline:
            raise _OverBudget("time")
        head = 0
        while alo + head < ahi and blo + head < bhi and a[alo + head] == b[blo + head]:
            head += 1
        tail = 0
        while (
            ahi - tail > alo + head
            and bhi - tail > blo + head
            and a[ahi - 1 - tail] == b[bhi - 1 - tail]
        ):
            tail += 1
        ma, mz, mb, my = alo + head, ahi - tail, blo + head, bhi - tail
        tasks: list[Opcode] = []
        if head:
            tasks.append(("equal", alo, ma, blo, mb))
        if ma == mz or mb == my:
            if ma != mz or mb != my:
                tasks.append(("replace", ma, mz, mb, my))
        elif (mz - ma) * (my - mb) <= _SMALL_GAP:
            tasks.extend(_difflib_ops(a, b, ma, mz, mb, my, deadline))
        else:
            if max(mz - ma, my - mb) > max_lines:
                raise _OverBudget("size")
            found = anchors(a, b, ma, mz, mb, my)
            if not found:
                tasks.extend(_difflib_ops(a, b, ma, mz, mb, my, deadline))
            else:
                i0, j0 = ma, mb
                for i, j in found:
                    tasks.append(("diff", i0, i, j0, j))
                    tasks.append(("equal", i, i + 1, j, j + 1))
                    i0, j0 = i + 1, j + 1
                tasks.append(("diff", i0, mz, j0, my))
        if tail:
            tasks.append(("equal", mz, ahi, my, bhi))
        stack.extend(reversed(tasks))
    return [_tag(op) for op in out]


def _difflib_ops(
    a: list[str], b: list[str], alo: int, ahi: int, blo: int, bhi: int, deadline: float
) -> list[Opcode]:
    matcher = _BudgetedMatcher(a[alo:ahi], b[blo:bhi], deadline)
    if matcher.work() > DIFF_MAX_WORK:
        raise _OverBudget("size")
    return [
        (tag, i1 + alo, i2 + alo, j1 + blo, j2 + blo)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
    ]


def _append(out: list[Opcode], op: Opcode) -> None:
    """Add ``op``, merging it with a neighbour of the same kind (every change is one block)."""
    tag, i1, i2, j1, j2 = op
    if i1 == i2 and j1 == j2:
        return
    if out:
        ptag, pi1, _pi2, pj1, _pj2 = out[-1]
        if (ptag == "equal") == (tag == "equal"):
            out[-1] = (ptag, pi1, i2, pj1, j2)
            return
    out.append(op)


def _tag(op: Opcode) -> Opcode:
    """A change block's precise tag: delete, insert or replace."""
    tag, i1, i2, j1, j2 = op
    if tag != "equal":
        tag = "insert" if i1 == i2 else "delete" if j1 == j2 else "replace"
    return (tag, i1, i2, j1, j2)


def summary(display: str, old: list[str], new: list[str], reason: str) -> str:
    """What a diff degrades to: the shape of the change, and how to see the rest."""
    why = "too large to compare" if reason == "size" else "over the time budget"
    return (
        f"file rewritten, {len(new)} lines (was {len(old)}): the line-by-line diff of "
        f"{display} is {why}, so it is summarised; read the file to see the new text\n"
    )


def _format(
    ops: list[Opcode], a: list[str], b: list[str], fromfile: str, tofile: str
) -> Iterator[str]:
    """``difflib.unified_diff``'s output for the opcodes ``ops``."""
    started = False
    for group in _Grouper(ops).get_grouped_opcodes(CONTEXT_LINES):
        if not started:
            started = True
            yield f"--- {fromfile}\n"
            yield f"+++ {tofile}\n"
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for line in a[i1:i2]:
                    yield " " + line
                continue
            if tag in ("replace", "delete"):
                for line in a[i1:i2]:
                    yield "-" + line
            if tag in ("replace", "insert"):
                for line in b[j1:j2]:
                    yield "+" + line


def _range(start: int, stop: int) -> str:
    """A unified diff range (``difflib``'s ``_format_range_unified``)."""
    beginning = start + 1
    length = stop - start
    if length == 1:
        return str(beginning)
    if not length:
        beginning -= 1
    return f"{beginning},{length}"


def _lines(text: str | None) -> list[str]:
    """Split keeping "\\n" terminators; only "\\n" splits (never form feeds or U+2028)."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines
