"""Patience-diff anchors: the lines both versions share exactly once, in an order both keep.

Two places align versions of a file: :mod:`.diffs` (the unified diffs the
editing tools report) and :mod:`.diagnostics.linediff` (which regions the
incremental checks re-examine). Both cut a large changed range at these
anchors, so ordinary edits of large files stay near-linear; this is the one
routine that finds them.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import TypeVar

Line = TypeVar("Line", bound=Hashable)


def anchors(
    a: Sequence[Line], b: Sequence[Line], alo: int, ahi: int, blo: int, bhi: int
) -> list[tuple[int, int]]:
    """The longest run of ``(i, j)`` pairs, increasing in both, of lines unique on both sides.

    Only ``a[alo:ahi]`` and ``b[blo:bhi]`` are considered; indices are absolute.
    Counting is C-backed (``Counter``) and the run is a longest increasing
    subsequence by patience sorting, ``O(k log k)`` for ``k`` unique common lines.
    """
    count_a = Counter(a[alo:ahi])
    count_b = Counter(b[blo:bhi])
    where_b = {line: j for j, line in enumerate(b[blo:bhi], blo) if count_b[line] == 1}
    pairs = [
        (i, where_b[line])
        for i, line in enumerate(a[alo:ahi], alo)
        if count_a[line] == 1 and line in where_b
    ]
    # Patience sorting: longest increasing subsequence of j (pairs are sorted by i).
    tops: list[int] = []
    top_index: list[int] = []
    back: list[int] = []
    for k, (_i, j) in enumerate(pairs):
        pos = bisect.bisect_left(tops, j)
        if pos == len(tops):
            tops.append(j)
            top_index.append(k)
        else:
            tops[pos] = j
            top_index[pos] = k
        back.append(top_index[pos - 1] if pos else -1)
    run: list[tuple[int, int]] = []
    k = top_index[-1] if top_index else -1
    while k >= 0:
        run.append(pairs[k])
        k = back[k]
    run.reverse()
    return run
