"""Check an engine's rows against the files as the resolver sees them.

rg and grep open files by path while they walk, and no flag makes them do it
relative to a directory fd; a directory swapped for a symlink at the wrong
moment would let them read a file outside the roots. The daemon cannot stop
that read, so it refuses to *report* it: every row an engine produced is
checked by opening its file through the race-free resolver (a regular file
inside a root) and, for content rows, comparing the reported line (and its
context lines) with the line at that number. A row that fails is dropped, so
no line from outside a root ever reaches a response. Each file is read once.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from airlock.daemon.errors import AirlockError
from airlock.daemon.fsio import read_all
from airlock.daemon.paths import Roots
from airlock.daemon.search.limits import LINE_CUT_MARKER, cut_line
from airlock.daemon.search.rows import Hit, strip_eol

# Files larger than this are not re-read to compare lines: their rows are dropped
# (rg's own output cap keeps such searches rare; file_read pages them instead).
VERIFY_MAX_BYTES = 64 * 1024 * 1024


def _same(reported: str, actual_raw: bytes) -> bool:
    actual = strip_eol(actual_raw.decode("utf-8", errors="replace"))
    if cut_line(actual) == reported:
        return True
    stem = reported.removesuffix(LINE_CUT_MARKER)
    return reported.endswith(LINE_CUT_MARKER) and actual.startswith(stem)


def _row_holds(hit: Hit, lines: list[bytes]) -> bool:
    n = hit.line
    if n < 1 or n > len(lines) or not _same(hit.text, lines[n - 1]):
        return False
    for k, text in enumerate(reversed(hit.before), 1):
        if n - k < 1 or not _same(text, lines[n - k - 1]):
            return False
    for k, text in enumerate(hit.after, 1):
        if n + k > len(lines) or not _same(text, lines[n + k - 1]):
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
            with roots.open_regular(resolved) as (fd, st):
                if not content:
                    kept_paths[path] = {id(h) for h in hits}
                    continue
                if st.st_size > VERIFY_MAX_BYTES:
                    continue
                lines = read_all(fd, st.st_size).split(b"\n")
        except (AirlockError, OSError):
            continue
        kept_paths[path] = {id(h) for h in hits if _row_holds(h, lines)}
    return [h for h in rows if id(h) in kept_paths.get(h.path, ())]
