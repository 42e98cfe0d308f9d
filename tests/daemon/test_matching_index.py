"""``LineIndex.find`` answers exactly what comparing every window answers.

The index takes several routes to an answer (a once-occurring anchor found by
a bounded scan, a repeated anchor's cached positions, the full table built
once the scan budget is spent); whatever the route and whatever came before
on the same index, the positions must be those of the straightforward search.
Lines come from a small pool so files repeat lines, hold blank lines and
whitespace / typographic variants of one another.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from airlock.daemon.matching import LINE_PASSES, NORMALISERS, LineIndex, MatchPass

POOL = [
    "",
    " ",
    "\t",
    "x = 1",
    "x = 1  ",
    "    x = 1",
    "\tx = 1",
    "return",
    "    return",
    "print('hi')",
    "print(\u2018hi\u2019)",
    "a \u2014 b",
    "a - b",
    "a\u00a0- b",
    "\ufeffdef f():",
    "def f():",
    "}",
]
LINE = st.one_of(st.sampled_from(POOL), st.text(alphabet="ab \t\u2019'", max_size=4))


def reference(
    lines: Sequence[str], needle: Sequence[str], match_pass: MatchPass, start: int, end: int | None
) -> list[int]:
    """Every window compared: what ``find`` must answer."""
    if not needle:
        return []
    norm = NORMALISERS[match_pass]
    hay = [norm(x) for x in lines]
    wanted = [norm(x) for x in needle]
    last = len(hay) - len(wanted)
    if end is not None:
        last = min(last, end)
    return [p for p in range(start, last + 1) if hay[p : p + len(wanted)] == wanted]


class Counting(LineIndex):
    """Counts from the first search (no direct scans)."""

    DIRECT_SCANS = 0


class Tight(LineIndex):
    """Counts at once, and no scan budget: every anchor goes to the full table."""

    DIRECT_SCANS = 0
    SCAN_BUDGET = 0


class Loose(LineIndex):
    DIRECT_SCANS = 0
    SCAN_BUDGET = 1_000_000


class Scanning(LineIndex):
    """Scans directly for every search of these small files."""

    DIRECT_SCANS = 1_000_000


KINDS = [LineIndex, Counting, Tight, Loose, Scanning]


@st.composite
def query(draw: st.DrawFn, lines: list[str]) -> tuple[list[str], MatchPass, int, int | None]:
    n = len(lines)
    if len(lines) > 0 and draw(st.booleans()):
        # A window of the file, sometimes with one line swapped for a pool line.
        a = draw(st.integers(0, n - 1))
        b = draw(st.integers(a + 1, min(n, a + 6)))
        needle = list(lines[a:b])
        if draw(st.booleans()):
            needle[draw(st.integers(0, len(needle) - 1))] = draw(LINE)
    else:
        needle = draw(st.lists(LINE, min_size=0, max_size=4))
    match_pass = draw(st.sampled_from(LINE_PASSES))
    start = draw(st.integers(0, n + 1))
    end = draw(st.one_of(st.none(), st.integers(0, n + 1)))
    return needle, match_pass, start, end


@st.composite
def file_and_queries(
    draw: st.DrawFn,
) -> tuple[list[str], list[tuple[list[str], MatchPass, int, int | None]]]:
    lines = draw(st.lists(LINE, min_size=0, max_size=60))
    queries = draw(st.lists(query(lines), min_size=1, max_size=12))
    return lines, queries


@settings(max_examples=500, deadline=None)
@given(
    file_and_queries(),
    st.sampled_from(KINDS),
    st.booleans(),
    st.none() | st.integers(0, 600),
)
def test_find_matches_every_window(
    case: tuple[list[str], list[tuple[list[str], MatchPass, int, int | None]]],
    kind: type[LineIndex],
    as_tuples: bool,
    announced: int | None,
) -> None:
    """``announced``: the number of searches the index is told to expect, if any."""
    lines, queries = case
    index = kind(tuple(lines) if as_tuples else lines)
    if announced is not None:
        index.expect_searches(announced)
    for needle, match_pass, start, end in queries:
        asked: Sequence[str] = tuple(needle) if as_tuples else needle
        assert index.find(asked, match_pass, start, end) == reference(
            lines, needle, match_pass, start, end
        )


@settings(max_examples=200, deadline=None)
@given(file_and_queries(), st.sampled_from(KINDS))
def test_find_first_pass_is_the_first_pass_with_a_match(
    case: tuple[list[str], list[tuple[list[str], MatchPass, int, int | None]]],
    kind: type[LineIndex],
) -> None:
    lines, queries = case
    index = kind(lines)
    for needle, _, start, end in queries:
        expected: tuple[MatchPass | None, list[int]] = (None, [])
        for match_pass in LINE_PASSES:
            found = reference(lines, needle, match_pass, start, end)
            if found:
                expected = (match_pass, found)
                break
        assert index.find_first_pass(needle, start, end) == expected


def test_a_forward_walk_over_a_big_file_never_builds_the_full_table() -> None:
    """The bench's shape: unique anchors met in order scan the file about once."""
    lines = [f"unique {i}" if i % 8 == 5 else ["", "return", "x = 1"][i % 3] for i in range(4000)]
    index = LineIndex(lines)
    index.expect_searches(50)
    cursor = 0
    for t in range(5, 4000, 80):
        needle = lines[t - 2 : t + 3]
        assert index.find(needle, MatchPass.EXACT, cursor) == [t - 2]
        cursor = t + 3
    table = index._tables[MatchPass.EXACT]
    assert table.full is None
    assert table.budget > 2 * len(lines)


def test_scans_past_the_budget_fall_back_to_the_full_table() -> None:
    """Chunks asked in reverse order (each a scan to the end) stop scanning after the budget."""
    lines = [f"unique {i}" for i in range(500)]
    index = LineIndex(lines)
    for t in range(499, -1, -1):
        assert index.find([lines[t]], MatchPass.EXACT, 0) == [t]
        assert index.find([lines[t]], MatchPass.EXACT, t + 1) == []
    assert index._tables[MatchPass.EXACT].full is not None


def test_one_search_scans_instead_of_counting_and_many_count_at_once() -> None:
    lines = [f"line {i}" for i in range(3000)]
    one = LineIndex(lines)
    assert one.find(lines[1000:1003], MatchPass.EXACT) == [1000]
    assert one._tables[MatchPass.EXACT].counts is None
    many = LineIndex(lines)
    many.expect_searches(500)
    assert many.find(lines[1000:1003], MatchPass.EXACT) == [1000]
    assert many._tables[MatchPass.EXACT].counts is not None


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(LINE, st.integers(0, 40).map(lambda i: f"u{i}")), min_size=1, max_size=60),
    st.data(),
)
def test_announced_needles_are_found_exactly(lines: list[str], data: st.DataObject) -> None:
    """A patch's shape: its chunks announced first, then searched with a forward cursor."""
    n = len(lines)
    needles: list[list[str]] = []
    for _ in range(data.draw(st.integers(3, 10))):
        a = data.draw(st.integers(0, n - 1))
        needle = lines[a : data.draw(st.integers(a + 1, min(n, a + 5)))]
        if data.draw(st.booleans()):
            needle = [*needle, data.draw(LINE)]
        needles.append(needle)
    index = data.draw(st.sampled_from([LineIndex, Counting, Tight]))(lines)
    index.expect_searches(len(needles))
    cursor = 0
    for needle in needles:
        start = data.draw(st.sampled_from([cursor, 0, data.draw(st.integers(0, n))]))
        found = index.find(needle, MatchPass.EXACT, start)
        assert found == reference(lines, needle, MatchPass.EXACT, start, None)
        if found:
            cursor = found[0] + len(needle)
