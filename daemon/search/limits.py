"""The caps that keep one search from flooding a model's context or the daemon.

Engine output is read up to ``ENGINE_OUTPUT_CAP`` and the engine is then
killed; any one line is cut at ``LINE_CAP`` bytes with ``LINE_CUT_MARKER``
appended; the response's rows are fitted into ``RESPONSE_BUDGET`` bytes of
JSON (the contract says 64 KiB; a little is kept back for the note and the
envelope).
"""

from __future__ import annotations

ENGINE_OUTPUT_CAP = 256 * 1024
LINE_CAP = 8 * 1024
RESPONSE_CAP = 64 * 1024
RESPONSE_BUDGET = RESPONSE_CAP - 2 * 1024
STDERR_CAP = 8 * 1024
LINE_CUT_MARKER = " [... line cut at 8 KiB]"
# When a single row (a match with wide context) would not fit the budget alone,
# its lines are cut this short instead, so at least one row always comes back.
TIGHT_LINE_CAP = 1024
TIGHT_LINE_CUT_MARKER = " [... line cut at 1 KiB]"

_REGEX_META = frozenset(".^$*+?()[]{}|\\")


def cut_line(text: str, cap: int = LINE_CAP, marker: str = LINE_CUT_MARKER) -> str:
    """``text`` cut to ``cap`` UTF-8 bytes (never mid-character) with a visible marker."""
    if len(text) * 4 <= cap:
        return text
    data = text.encode("utf-8", errors="surrogateescape")
    if len(data) <= cap:
        return text
    return data[:cap].decode("utf-8", errors="ignore") + marker


def has_regex_meta(pattern: str) -> bool:
    """Whether ``pattern`` needs a regex engine; without metacharacters it is searched literally."""
    return any(ch in _REGEX_META for ch in pattern)
