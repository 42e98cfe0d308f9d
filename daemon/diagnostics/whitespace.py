"""The ``whitespace`` check for files git cannot judge (outside a work tree, or untracked).

It finds what ``git diff --check`` would: trailing whitespace, a space before
a tab in an indent, leftover conflict markers; plus lines indented against
the file's own majority style (tabs in a space-indented file or the reverse).
The whole file is examined; the baseline subtraction is what narrows it down
to the lines an edit touched.
"""

from __future__ import annotations

from airlock.daemon.diagnostics.model import MAX_FINDINGS_PER_FILE, Finding, finding

CHECK = "whitespace"

_CONFLICT_OPEN = "<<<<<<< "
_CONFLICT_CLOSE = ">>>>>>> "
_CONFLICT_BASE = "||||||| "


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _majority_indent(lines: list[str]) -> str | None:
    """ "tab" or "space" when one style clearly dominates (twice the other), else None."""
    tabs = spaces = 0
    for line in lines:
        if line.startswith("\t"):
            tabs += 1
        elif line.startswith("  ") and line.strip():
            spaces += 1
    if tabs >= 2 * spaces and tabs:
        return "tab"
    if spaces >= 2 * tabs and spaces:
        return "space"
    return None


def check_whitespace(text: str, display: str, *, markdown: bool = False) -> list[Finding]:
    """All whitespace problems of ``text`` (LF-normalised)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    majority = _majority_indent(lines)
    has_conflict = any(
        line.startswith(_CONFLICT_OPEN) or line == _CONFLICT_OPEN.strip() for line in lines
    )
    out: list[Finding] = []

    def add(number: int, column: int, code: str, message: str, severity: str = "warning") -> None:
        out.append(
            finding(
                path=display,
                line=number,
                column=column,
                severity="error" if severity == "error" else "warning",
                check=CHECK,
                code=code,
                message=message,
                anchor=lines[number - 1],
            )
        )

    for number, line in enumerate(lines, start=1):
        if len(out) >= MAX_FINDINGS_PER_FILE:
            break
        body = line.rstrip("\r")
        stripped = body.rstrip(" \t")
        if stripped != body and not (markdown and body.endswith("  ") and stripped == body[:-2]):
            add(number, len(stripped) + 1, "trailing-whitespace", "trailing whitespace")
        indent = _indent(body)
        if " \t" in indent:
            add(number, indent.index(" \t") + 1, "space-before-tab", "space before tab in indent")
        elif stripped and majority == "space" and indent.startswith("\t"):
            add(
                number,
                1,
                "inconsistent-indentation",
                "indented with tabs while the rest of the file uses spaces",
            )
        elif stripped and majority == "tab" and indent.startswith("  "):
            add(
                number,
                1,
                "inconsistent-indentation",
                "indented with spaces while the rest of the file uses tabs",
            )
        if has_conflict and (
            body.startswith((_CONFLICT_OPEN, _CONFLICT_CLOSE, _CONFLICT_BASE))
            or body in ("=======", "<<<<<<<", ">>>>>>>")
        ):
            add(number, 1, "conflict-marker", "leftover conflict marker", "error")
    return out
