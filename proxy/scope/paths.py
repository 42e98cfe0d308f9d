"""Request paths for scope checks: one unambiguous form, and the glob that matches it.

A path is judged as the upstream will read it, so every encoding that two
readers could disagree on is refused outright instead of guessed: an encoded
slash or dot (``%2F``, ``%2E``), an encoded or literal backslash, an empty
segment (``//``) and NUL. What remains is percent-decoded and has its dot
segments removed (RFC 3986 section 5.2.4); a path that removal would change
(it had ``.`` or ``..`` segments) is refused too, because an upstream that
routes on the raw path would read ``/repos/o/x/../r`` as repository ``o/x``
while the normalised form says ``o/r``.

Globs: ``*`` matches within one ``/``-separated segment, ``**`` across any
number of segments, and a trailing ``/**`` also matches zero segments
(``/repos/o/r/**`` matches ``/repos/o/r``). The same globs serve git
``push_refs`` (``refs/heads/agent/*``).
"""

from __future__ import annotations

import functools
import re
from urllib.parse import unquote

__all__ = ["AmbiguousPath", "compile_glob", "glob_match", "normalize_path"]

_BAD_ESCAPES = re.compile(r"%(2[fF]|2[eE]|5[cC]|00)")
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


class AmbiguousPath(ValueError):
    """The path has an encoding readers could disagree on; the text says which."""


def normalize_path(target: str) -> str:
    """The request target's path, decoded and without dot segments.

    ``target`` is the path as sent (origin form, query included). Raises
    :class:`AmbiguousPath` for the encodings this module refuses.
    """
    path = target.split("?", 1)[0].split("#", 1)[0]
    if not path.startswith("/"):
        raise AmbiguousPath("the path must start with '/'")
    bad = _BAD_ESCAPES.search(path)
    if bad is not None:
        raise AmbiguousPath(f"the path has an encoded '{unquote(bad.group(0))!r}' ({bad.group(0)})")
    if "\\" in path:
        raise AmbiguousPath("the path has a backslash")
    if "\0" in path:
        raise AmbiguousPath("the path has a NUL")
    if "//" in path:
        raise AmbiguousPath("the path has an empty segment ('//')")
    if _ESCAPE.search(path):
        raise AmbiguousPath("the path has a malformed percent escape")
    decoded = unquote(path, errors="strict")
    if "\0" in decoded or "\\" in decoded:
        raise AmbiguousPath("the path decodes to a NUL or backslash")
    normalized = remove_dot_segments(decoded)
    if normalized != decoded:
        # An upstream that routes on the raw path would read /repos/o/x/../r as
        # repository o/x while the normalised form says o/r: never guess.
        raise AmbiguousPath("the path has '.' or '..' segments")
    return normalized


def remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 for an absolute path (``..`` never climbs above ``/``)."""
    out: list[str] = []
    segments = path.split("/")[1:]
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == ".":
            if last:
                out.append("")
            continue
        if seg == "..":
            if out:
                out.pop()
            if last:
                out.append("")
            continue
        out.append(seg)
    return "/" + "/".join(out)


@functools.lru_cache(maxsize=4096)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """A glob as an anchored regular expression (cached: rules repeat per request)."""
    parts: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        if pattern.startswith("/**/", i):
            parts.append("(?:/.*)?/")  # a middle /**/ also matches zero segments
            i += 4
        elif pattern.startswith("/**", i) and i + 3 == n:
            parts.append("(?:/.*)?")  # trailing /** also matches zero segments
            i += 3
        elif pattern.startswith("**", i):
            parts.append(".*")
            i += 2
        elif pattern[i] == "*":
            parts.append("[^/]*")
            i += 1
        else:
            parts.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(parts), re.DOTALL)


def glob_match(pattern: str, value: str) -> bool:
    return compile_glob(pattern).fullmatch(value) is not None
