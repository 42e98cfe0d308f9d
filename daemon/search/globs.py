"""Glob patterns (gitignore and rg ``--glob`` flavour) translated to regular expressions.

One translator serves three users: .gitignore lines, the user's ``glob``
argument in the grep fallback, and the rg type table. Keeping it in one place
is what makes the grep fallback select the same files as rg.
"""

from __future__ import annotations

import re


def _class(glob: str, i: int) -> tuple[str, int] | None:
    """Translate a ``[...]`` class starting at ``glob[i] == '['``; None when unterminated."""
    j = i + 1
    negate = False
    if j < len(glob) and glob[j] in "!^":
        negate = True
        j += 1
    body_start = j
    if j < len(glob) and glob[j] == "]":
        j += 1
    while j < len(glob) and glob[j] != "]":
        j += 1
    if j >= len(glob):
        return None
    body = glob[body_start:j]
    parts: list[str] = []
    k = 0
    while k < len(body):
        ch = body[k]
        if ch == "\\" and k + 1 < len(body):
            parts.append(re.escape(body[k + 1]))
            k += 2
            continue
        if ch == "-" and parts and k + 1 < len(body):
            parts.append("-")
        else:
            parts.append(re.escape(ch) if ch in "\\^]-[" else ch)
        k += 1
    inner = "".join(parts)
    # A class never matches the path separator, like git's wildmatch with FNM_PATHNAME.
    return (f"(?!/)[^{inner}]" if negate else f"(?!/)[{inner}]"), j + 1


def _brace_end(glob: str, i: int) -> int:
    depth = 0
    for j in range(i, len(glob)):
        if glob[j] == "\\":
            continue
        if glob[j] == "{":
            depth += 1
        elif glob[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _split_alternatives(body: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    escaped = False
    for ch in body:
        if escaped:
            current.append(ch)
            escaped = False
            continue
        if ch == "\\":
            current.append(ch)
            escaped = True
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def translate(glob: str, *, braces: bool = False) -> str:
    """The regex body (no anchors) matching what ``glob`` matches.

    ``*`` and ``?`` never cross ``/``; ``**`` as a whole segment crosses any
    number of directories (``a/**/b`` matches ``a/b``); ``{a,b}`` alternation
    only when ``braces`` (rg globs have it, .gitignore does not).
    """
    out: list[str] = []
    i = 0
    n = len(glob)
    while i < n:
        ch = glob[i]
        if ch == "*":
            j = i
            while j < n and glob[j] == "*":
                j += 1
            if j - i >= 2 and (i == 0 or glob[i - 1] == "/") and (j == n or glob[j] == "/"):
                if j == n:
                    out.append(".*")
                    i = j
                else:
                    out.append("(?:.*/)?")
                    i = j + 1
                continue
            out.append("[^/]*")
            i = j
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            translated = _class(glob, i)
            if translated is None:
                out.append(re.escape(ch))
                i += 1
            else:
                out.append(translated[0])
                i = translated[1]
        elif ch == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
        elif braces and ch == "{" and (end := _brace_end(glob, i)) > i:
            alternatives = _split_alternatives(glob[i + 1 : end])
            out.append("(?:" + "|".join(translate(a, braces=True) for a in alternatives) + ")")
            i = end + 1
        else:
            out.append(re.escape(ch))
            i += 1
    return "".join(out)


def compile_glob(glob: str, *, braces: bool = False) -> re.Pattern[str]:
    return re.compile("^" + translate(glob, braces=braces) + "$", re.DOTALL)
