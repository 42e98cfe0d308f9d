"""Unified diffs of LF text, as every editing tool reports them."""

from __future__ import annotations

import difflib


def unified_diff(display: str, before: str | None, after: str | None) -> str:
    old = _lines(before)
    new = _lines(after)
    fromfile = f"a/{display}" if before is not None else "/dev/null"
    tofile = f"b/{display}" if after is not None else "/dev/null"
    out: list[str] = []
    for line in difflib.unified_diff(old, new, fromfile=fromfile, tofile=tofile, lineterm="\n"):
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def _lines(text: str | None) -> list[str]:
    """Split keeping "\\n" terminators; only "\\n" splits (never form feeds or U+2028)."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines
