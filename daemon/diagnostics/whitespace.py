"""The ``whitespace`` check for files git cannot judge (outside a work tree, or untracked).

It finds what ``git diff --check`` would: trailing whitespace, a space before
a tab in an indent, leftover conflict markers; plus lines indented against
the file's own majority style (tabs in a space-indented file or the reverse).
The whole file is examined the first time; after an edit only the changed
lines are (:func:`recheck_lines`, exactly the same answer); the baseline
subtraction is what narrows it down to the lines an edit touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from .model import MAX_FINDINGS_PER_FILE, Finding, finding

CHECK = "whitespace"

_CONFLICT_OPEN = "<<<<<<< "
_CONFLICT_CLOSE = ">>>>>>> "
_CONFLICT_BASE = "||||||| "


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


@dataclass(frozen=True)
class WhitespaceState:
    """What an incremental re-check needs of the previous version: its findings and the
    counts behind the file-wide judgements (majority indent, conflict markers present)."""

    findings: list[Finding]
    tabs: int
    spaces: int
    conflicts: int
    markdown: bool


def _counts(lines: Sequence[str]) -> tuple[int, int, int]:
    tabs = spaces = conflicts = 0
    for line in lines:
        if line.startswith("\t"):
            tabs += 1
        elif line.startswith("  ") and line.strip():
            spaces += 1
        if line.startswith(_CONFLICT_OPEN) or line == _CONFLICT_OPEN.strip():
            conflicts += 1
    return tabs, spaces, conflicts


def _majority(tabs: int, spaces: int) -> str | None:
    if tabs >= 2 * spaces and tabs:
        return "tab"
    if spaces >= 2 * tabs and spaces:
        return "space"
    return None


def _line_findings(
    number: int,
    line: str,
    display: str,
    majority: str | None,
    has_conflict: bool,
    markdown: bool,
    out: list[Finding],
) -> None:
    def add(column: int, code: str, message: str, severity: str = "warning") -> None:
        out.append(
            finding(
                path=display,
                line=number,
                column=column,
                severity="error" if severity == "error" else "warning",
                check=CHECK,
                code=code,
                message=message,
                anchor=line,
            )
        )

    body = line.rstrip("\r")
    stripped = body.rstrip(" \t")
    if stripped != body and not (markdown and body.endswith("  ") and stripped == body[:-2]):
        add(len(stripped) + 1, "trailing-whitespace", "trailing whitespace")
    indent = _indent(body)
    if " \t" in indent:
        add(indent.index(" \t") + 1, "space-before-tab", "space before tab in indent")
    elif stripped and majority == "space" and indent.startswith("\t"):
        add(
            1,
            "inconsistent-indentation",
            "indented with tabs while the rest of the file uses spaces",
        )
    elif stripped and majority == "tab" and indent.startswith("  "):
        add(
            1,
            "inconsistent-indentation",
            "indented with spaces while the rest of the file uses tabs",
        )
    if has_conflict and (
        body.startswith((_CONFLICT_OPEN, _CONFLICT_CLOSE, _CONFLICT_BASE))
        or body in ("=======", "<<<<<<<", ">>>>>>>")
    ):
        add(1, "conflict-marker", "leftover conflict marker", "error")


def _lines_of(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def check_whitespace(text: str, display: str, *, markdown: bool = False) -> list[Finding]:
    """All whitespace problems of ``text`` (LF-normalised)."""
    return check_lines(_lines_of(text), display, markdown=markdown).findings


def check_lines(lines: Sequence[str], display: str, *, markdown: bool) -> WhitespaceState:
    """The full check over ``lines``, with the state an incremental re-check starts from."""
    tabs, spaces, conflicts = _counts(lines)
    majority = _majority(tabs, spaces)
    out: list[Finding] = []
    for number, line in enumerate(lines, start=1):
        if len(out) >= MAX_FINDINGS_PER_FILE:
            break
        _line_findings(number, line, display, majority, conflicts > 0, markdown, out)
    return WhitespaceState(out, tabs, spaces, conflicts, markdown)


def recheck_lines(
    previous: WhitespaceState,
    old_lines: Sequence[str],
    lines: Sequence[str],
    changed: Sequence[tuple[int, int, int, int]],
    display: str,
) -> WhitespaceState:
    """The same answer as :func:`check_lines` on ``lines``, re-examining only ``changed``.

    Unchanged lines keep their findings (moved to their new numbers) as long as
    the file-wide judgements are the same; otherwise, or near the findings cap
    (the full check stops at it), the whole file is checked.
    """
    markdown = previous.markdown
    tabs, spaces, conflicts = previous.tabs, previous.spaces, previous.conflicts
    for os_, oe, ns, ne in changed:
        t0, s0, c0 = _counts(old_lines[os_:oe])
        t1, s1, c1 = _counts(lines[ns:ne])
        tabs, spaces, conflicts = tabs - t0 + t1, spaces - s0 + s1, conflicts - c0 + c1
    majority = _majority(tabs, spaces)
    same_judgement = majority == _majority(previous.tabs, previous.spaces) and (
        (conflicts > 0) == (previous.conflicts > 0)
    )
    near_cap = MAX_FINDINGS_PER_FILE - 3
    if not same_judgement or len(previous.findings) >= near_cap:
        return check_lines(lines, display, markdown=markdown)
    out: list[Finding] = []
    old = iter(previous.findings)
    pending = next(old, None)
    shift = 0
    for os_, oe, ns, ne in [*changed, (len(old_lines), len(old_lines), len(lines), len(lines))]:
        while pending is not None and pending.diagnostic.line - 1 < os_:
            out.append(_moved(pending, shift))
            pending = next(old, None)
        while pending is not None and pending.diagnostic.line - 1 < oe:
            pending = next(old, None)  # its line changed: judged again below
        for index in range(ns, min(ne, len(lines))):
            _line_findings(index + 1, lines[index], display, majority, conflicts > 0, markdown, out)
        shift = ne - oe
    if len(out) >= near_cap:
        return check_lines(lines, display, markdown=markdown)
    return WhitespaceState(out, tabs, spaces, conflicts, markdown)


def _moved(item: Finding, shift: int) -> Finding:
    if not shift:
        return item
    return Finding(replace(item.diagnostic, line=item.diagnostic.line + shift), item.anchor)
