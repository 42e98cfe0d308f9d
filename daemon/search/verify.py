"""Check an engine's rows against the files as the resolver sees them.

rg and grep open files by path while they walk, and no flag makes them do it
relative to a directory fd; a directory swapped for a symlink at the wrong
moment would let them read a file outside the roots. The daemon cannot stop
that read, so it refuses to *report* it: every row an engine produced is
checked by opening its file through the race-free resolver (a regular file
inside a root) and, for content rows, comparing the reported line (and its
context lines) with the line at that number. A row that fails is dropped, so
no line from outside a root ever reaches a response. Each file is read once,
in chunks, keeping only the lines the rows quote. ``count`` and
``files_with_matches`` rows are counted again on the opened files instead
(:mod:`airlock.daemon.search.recount`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import AirlockError
from ..paths import Roots
from .limits import LINE_CAP, LINE_CUT_MARKER, cut_line
from .rows import Hit, strip_eol


def _same(reported: str, actual_raw: bytes) -> bool:
    actual = strip_eol(actual_raw.decode("utf-8", errors="replace"))
    if cut_line(actual) == reported:
        return True
    stem = reported.removesuffix(LINE_CUT_MARKER)
    return reported.endswith(LINE_CUT_MARKER) and actual.startswith(stem)


_CHUNK = 1 << 20
# Enough of a line to compare it with a reported one: rows are cut at LINE_CAP bytes.
_KEEP = LINE_CAP + 8


def wanted_lines(hits: Sequence[Hit]) -> set[int]:
    """Every line number a file's content rows quote (matches and their context)."""
    want: set[int] = set()
    for hit in hits:
        want.update(range(hit.line - len(hit.before), hit.line + len(hit.after) + 1))
    return want


def read_lines(fd: int, want: set[int]) -> dict[int, bytes]:
    """The first ``_KEEP`` bytes of each wanted line, read in 1 MiB chunks.

    Memory stays at one chunk plus the kept prefixes, whatever the file's size
    (reading the whole file and splitting it cost +304 MiB on a 64 MiB file).
    Reading stops after the last wanted line.
    """
    out: dict[int, bytes] = {}
    if not want:
        return out
    last = max(want)
    line, partial, keeping = 1, bytearray(), 1 in want
    while line <= last:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            break
        start = 0
        while line <= last:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if keeping and len(partial) < _KEEP:
                partial += piece[: _KEEP - len(partial)]
            if end < 0:
                break
            if keeping:
                out[line] = bytes(partial)
            line += 1
            partial.clear()
            keeping = line in want
            start = end + 1
    if keeping and line <= last and line not in out and partial:
        out[line] = bytes(partial)  # the last line, without a newline
    return out


def _row_holds(hit: Hit, lines: dict[int, bytes]) -> bool:
    n = hit.line
    if n < 1 or n not in lines or not _same(hit.text, lines[n]):
        return False
    for k, text in enumerate(reversed(hit.before), 1):
        if n - k not in lines or not _same(text, lines[n - k]):
            return False
    for k, text in enumerate(hit.after, 1):
        if n + k not in lines or not _same(text, lines[n + k]):
            return False
    return True


def verify_rows(roots: Roots, root: Path, rows: Sequence[Hit], *, content: bool) -> list[Hit]:
    """The rows whose file (and, for ``content``, whose lines) the resolver confirms."""
    by_path: dict[str, list[Hit]] = {}
    for hit in rows:
        by_path.setdefault(hit.path, []).append(hit)
    kept_paths: dict[str, set[int]] = {}
    for path, hits in by_path.items():
        try:
            resolved = roots.resolve(str(root / path) if path else str(root), intent="read")
            with roots.open_regular(resolved) as (fd, _st):
                if not content:
                    kept_paths[path] = {id(h) for h in hits}
                    continue
                lines = read_lines(fd, wanted_lines(hits))
        except (AirlockError, OSError):
            continue
        kept_paths[path] = {id(h) for h in hits if _row_holds(h, lines)}
    return [h for h in rows if id(h) in kept_paths.get(h.path, ())]
