"""Which lines an edit changed: the regions the incremental checks re-examine.

The worker sees only file contents, one version after another; to re-check
just what changed it needs a line alignment of the two versions. Any valid
alignment is correct (a coarser one only re-checks more), so this is a fast
one rather than a minimal one: equal prefix and suffix trimmed, then lines
that occur exactly once in both versions serve as anchors (patience diff:
the longest increasing run of them, in C-backed ``bisect`` steps), and equal
runs around each anchor are extended. Linear in the number of lines plus
``k log k`` for ``k`` anchors; a file of repeated lines only degrades to one
large region, never to quadratic time.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, count
from operator import ne

from ..anchors import anchors

Region = tuple[int, int, int, int]
"""``(old_start, old_end, new_start, new_end)``: half-open line ranges that differ."""


_WINDOW = 256
_CHUNK = 64


def regions(old: Sequence[bytes | str], new: Sequence[bytes | str]) -> list[Region]:
    """Changed regions, in order, such that everything outside them is equal line for line.

    Walks both versions: equal runs are skipped by comparing slices (C speed),
    and after a difference the two sides are re-synchronised within a window
    of :data:`_WINDOW` lines by a dict lookup. An edit made of scattered small
    changes (the common case) costs little more than comparing the two lists;
    a difference the window cannot bridge goes to :func:`patience` for the rest.
    """
    n, m = len(old), len(new)
    if n == m:
        scattered = _replaced_lines(old, new)
        if scattered is not None:
            return scattered
    out: list[Region] = []
    i = j = 0
    while True:
        step = _equal_run(old, new, i, j)
        i, j = i + step, j + step
        if i >= n or j >= m:
            break
        sync = _resync(old, new, i, j)
        if sync is None:
            out.extend(patience(old[i:], new[j:], i, j))
            return out
        a, b = sync
        out.append((i, a, j, b))
        i, j = a, b
    if i < n or j < m:
        out.append((i, n, j, m))
    return out


_SCATTERED_MAX = 8
"""With equal lengths, a line-by-line comparison is an alignment: taken when at most one
line in this many differs (lines replaced in place, the usual edit); a shift (an
insertion and a deletion far apart) differs everywhere between and goes the general way."""


def _replaced_lines(old: Sequence[bytes | str], new: Sequence[bytes | str]) -> list[Region] | None:
    """Regions of two equally long versions compared line for line (one C-speed pass), or
    None when too many lines differ for that to be a useful alignment."""
    differing = list(compress(count(), map(ne, old, new)))
    if len(differing) > max(64, len(old) // _SCATTERED_MAX):
        return None
    out: list[Region] = []
    for index in differing:
        if out and out[-1][1] == index:
            start = out[-1][0]
            out[-1] = (start, index + 1, start, index + 1)
        else:
            out.append((index, index + 1, index, index + 1))
    return out


def _equal_run(old: Sequence[bytes | str], new: Sequence[bytes | str], i: int, j: int) -> int:
    """How many lines are equal from ``old[i]`` / ``new[j]`` on (slice compares, doubling)."""
    run = 0
    size = _CHUNK
    while True:
        a, b = old[i + run : i + run + size], new[j + run : j + run + size]
        if a == b and len(a) == size:
            run += size
            size *= 2
            continue
        lo, hi = 0, min(len(a), len(b))  # the first difference in a[lo:hi], by halves
        while hi - lo > 8:
            mid = (lo + hi) // 2
            if a[lo:mid] == b[lo:mid]:
                lo = mid
            else:
                hi = mid
        for x, y in zip(a[lo:hi], b[lo:hi], strict=False):
            if x != y:
                return run + lo
            lo += 1
        return run + lo


def _resync(
    old: Sequence[bytes | str], new: Sequence[bytes | str], i: int, j: int
) -> tuple[int, int] | None:
    """The nearest ``(a, b)`` past a difference where two equal lines start again."""
    # The usual edits first: one line replaced, inserted or deleted.
    if old[i + 1 : i + 3] == new[j + 1 : j + 3] and i + 1 < len(old) and j + 1 < len(new):
        return (i + 1, j + 1)
    if old[i : i + 2] == new[j + 1 : j + 3] and j + 1 < len(new) and i < len(old):
        return (i, j + 1)
    if old[i + 1 : i + 3] == new[j : j + 2] and i + 1 < len(old) and j < len(new):
        return (i + 1, j)
    for window in (8, _WINDOW):
        found = _resync_within(old, new, i, j, window)
        if found is not None:
            return found
    return None


def _resync_within(
    old: Sequence[bytes | str], new: Sequence[bytes | str], i: int, j: int, window: int
) -> tuple[int, int] | None:
    window_new: dict[bytes | str, int] = {}
    for b in range(j, min(len(new), j + window)):
        window_new.setdefault(new[b], b)
    best: tuple[int, int] | None = None
    for a in range(i, min(len(old), i + window)):
        if best is not None and a - i >= best[0] + best[1] - i - j:
            break
        found = window_new.get(old[a])
        if found is None or (a == i and found == j):
            continue
        b = found
        if old[a + 1 : a + 2] != new[b + 1 : b + 2]:
            continue
        if best is None or a + b < best[0] + best[1]:
            best = (a, b)
    return best


def patience(
    old: Sequence[bytes | str], new: Sequence[bytes | str], base_old: int = 0, base_new: int = 0
) -> list[Region]:
    """Regions by unique-line anchors, offsets shifted by ``base_old``/``base_new``."""
    return [
        (a + base_old, b + base_old, c + base_new, d + base_new)
        for a, b, c, d in _patience(old, new)
    ]


def _patience(old: Sequence[bytes | str], new: Sequence[bytes | str]) -> list[Region]:
    n, m = len(old), len(new)
    lo = 0
    while lo < n and lo < m and old[lo] == new[lo]:
        lo += 1
    hi_old, hi_new = n, m
    while hi_old > lo and hi_new > lo and old[hi_old - 1] == new[hi_new - 1]:
        hi_old -= 1
        hi_new -= 1
    if lo == hi_old and lo == hi_new:
        return []
    pairs = anchors(old, new, lo, hi_old, lo, hi_new)
    out: list[Region] = []
    i, j = lo, lo
    for a, b in [*pairs, (hi_old, hi_new)]:
        # extend the equal run forward from (i, j) and backward from (a, b)
        while i < a and j < b and old[i] == new[j]:
            i += 1
            j += 1
        ea, eb = a, b
        while ea > i and eb > j and old[ea - 1] == new[eb - 1]:
            ea -= 1
            eb -= 1
        if i < ea or j < eb:
            out.append((i, ea, j, eb))
        i, j = a + 1, b + 1
    return out
