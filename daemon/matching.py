"""The matching tiers shared by ``file_patch`` and ``apply_patch``.

Both tools look for a block of old lines in a file, trying progressively
looser comparisons and stopping at the first pass that finds anything, so a
model's small whitespace or typography slips still land while an exact match
always wins. One index per file makes repeated searches (hundreds of chunks in
one patch) cost a dictionary lookup instead of a scan.
"""

from __future__ import annotations

import bisect
import difflib
from collections import Counter
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Literal


class MatchPass(StrEnum):
    EXACT = "exact"
    TRAILING_WHITESPACE = "trailing_whitespace"
    INDENTATION = "indentation"  # leading and trailing whitespace ignored
    TYPOGRAPHIC = "typographic"  # and typographic look-alikes folded to ASCII


_TYPOGRAPHIC = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u2026": "...",
        "\u00a0": " ",
        "\u2000": " ",
        "\u2001": " ",
        "\u2002": " ",
        "\u2003": " ",
        "\u2004": " ",
        "\u2005": " ",
        "\u2006": " ",
        "\u2007": " ",
        "\u2008": " ",
        "\u2009": " ",
        "\u200a": " ",
        "\u202f": " ",
        "\u205f": " ",
        "\u3000": " ",
        "\ufeff": "",
        "\u200b": "",
    }
)


def fold_typography(text: str) -> str:
    return text.translate(_TYPOGRAPHIC)


def _typographic(line: str) -> str:
    return fold_typography(line).strip()


NORMALISERS: dict[MatchPass, Callable[[str], str]] = {
    MatchPass.EXACT: lambda line: line,
    MatchPass.TRAILING_WHITESPACE: str.rstrip,
    MatchPass.INDENTATION: str.strip,
    MatchPass.TYPOGRAPHIC: _typographic,
}

LINE_PASSES: tuple[MatchPass, ...] = tuple(MatchPass)


class _PassTable:
    """One pass's normalised lines and what is known of where each occurs."""

    __slots__ = ("budget", "counts", "direct", "full", "hay", "repeated")

    def __init__(self, hay: list[str], budget: int, direct: int) -> None:
        self.hay = hay
        self.counts: dict[str, int] | None = None  # built at the first search past ``direct``
        self.direct = direct  # list elements searches may scan before the counts are built
        self.full: dict[str, list[int]] | None = None  # every line's positions, built late
        self.repeated: dict[str, list[int]] = {}  # positions of lines scanned so far
        self.budget = budget  # list elements left to scan before building ``full``

    def count(self) -> dict[str, int]:
        counts = self.counts = Counter(self.hay)  # C-level: one hash per line
        return counts

    def scan(self, wanted: list[str], start: int, last_start: int) -> list[int]:
        """Every match in ``[start, last_start]``, without counts: one C scan of that range.

        Cheaper than counting the whole file (a hash and a dict update per line)
        for the first search or two; anchored on the needle's longest line, which
        is seldom a blank or a lone brace.
        """
        size = len(wanted)
        anchor = max(range(size), key=lambda k: len(wanted[k]))
        line = wanted[anchor]
        hay = self.hay
        index = hay.index
        lo = start + anchor
        stop = last_start + anchor + 1
        self.direct -= stop - lo
        found: list[int] = []
        while True:
            try:
                q = index(line, lo, stop)
            except ValueError:
                return found
            p = q - anchor
            if hay[p : p + size] == wanted:
                found.append(p)
            lo = q + 1

    def build_full(self) -> dict[str, list[int]]:
        full: dict[str, list[int]] = {}
        for i, line in enumerate(self.hay):
            full.setdefault(line, []).append(i)
        self.full = full
        return full

    def positions(self, line: str) -> list[int]:
        """Every position of ``line`` (which occurs in the file), ascending."""
        full = self.full
        if full is not None:
            return full[line]
        cached = self.repeated.get(line)
        if cached is not None:
            return cached
        if self.budget < 0:
            return self.build_full()[line]
        index = self.hay.index
        found: list[int] = []
        at = -1
        assert self.counts is not None
        for _ in range(self.counts[line]):
            at = index(line, at + 1)
            found.append(at)
        self.budget -= at + 1
        self.repeated[line] = found
        return found


class LineIndex:
    """Where each (normalised) line occurs, learned lazily per pass, as little as needed.

    A big patch on a big file is hundreds of searches; a full line -> positions
    table costs a Python loop over every line. Instead a pass's first search or
    two just scan the range they search (one C-level ``list.index`` pass, far
    cheaper than hashing every line: what a one-chunk edit of a big file needs);
    after that the pass keeps a C-level count of its lines, and a search anchors
    on the needle's rarest line: a line that occurs once in the whole file is
    found by ``list.index`` from the cursor (the cursor only moves forward
    through a patch, so a file's chunks scan it about once); a line that occurs
    more often gets its positions scanned once and cached. When the scans add
    up to more than a few passes over the file (chunks out of order, many
    repeated anchors), the pass builds the full table once and uses it from
    then on. Every route answers exactly what comparing every window would
    (``tests/daemon/test_matching_index.py``).
    """

    SCAN_BUDGET = 4  # whole-file scans a pass may spend before building the full table
    DIRECT_SCANS = 2  # whole-file scans a pass's first searches may spend before counting

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines
        self._normalised: dict[MatchPass, list[str]] = {}
        self._tables: dict[MatchPass, _PassTable] = {}
        self._direct_scans = self.DIRECT_SCANS

    def expect_searches(self, count: int) -> None:
        """A caller about to search ``count`` times: with more than a couple, count at once."""
        if count > 2:
            self._direct_scans = 0

    def normalised(self, match_pass: MatchPass) -> list[str]:
        cached = self._normalised.get(match_pass)
        if cached is None:
            if match_pass is MatchPass.EXACT:
                # The exact pass compares the lines themselves: no copy needed.
                lines = self.lines
                cached = lines if isinstance(lines, list) else list(lines)
            else:
                norm = NORMALISERS[match_pass]
                cached = [norm(x) for x in self.lines]
            self._normalised[match_pass] = cached
        return cached

    def _table(self, match_pass: MatchPass) -> _PassTable:
        table = self._tables.get(match_pass)
        if table is None:
            hay = self.normalised(match_pass)
            direct = self._direct_scans * len(hay) - 1  # -1: no direct scan at all
            table = _PassTable(hay, self.SCAN_BUDGET * len(hay), direct)
            self._tables[match_pass] = table
        return table

    def find(
        self,
        needle: Sequence[str],
        match_pass: MatchPass,
        start: int = 0,
        end: int | None = None,
    ) -> list[int]:
        """Every start position ``p`` in ``[start, end]`` where ``needle`` matches.

        Anchors on the needle's rarest line: a first line that is blank or a
        ``return`` occurs thousands of times in real code, which would make
        hundreds of lookups on a big file cost O(chunks x occurrences).
        """
        if not needle:
            return []
        table = self._tables.get(match_pass) or self._table(match_pass)
        hay = table.hay
        if match_pass is MatchPass.EXACT:
            wanted = needle if isinstance(needle, list) else list(needle)
        else:
            norm = NORMALISERS[match_pass]
            wanted = [norm(x) for x in needle]
        size = len(wanted)
        last_start = len(hay) - size
        if end is not None and end < last_start:
            last_start = end
        if last_start < start:
            return []
        counts = table.counts
        if counts is None:
            if table.direct >= 0:
                return table.scan(wanted, start, last_start)
            counts = table.count()
        anchor = 0
        fewest = 0
        for k, line in enumerate(wanted):
            count = counts.get(line, 0)
            if not count:
                return []
            if not fewest or count < fewest:
                anchor, fewest = k, count
                if count == 1:
                    break
        line = wanted[anchor]
        lo = start + anchor
        hi = last_start + anchor
        if fewest == 1 and table.full is None and table.budget >= 0:
            # The anchor occurs once in the file: look for it in [lo, hi] only.
            try:
                q = hay.index(line, lo, hi + 1)
            except ValueError:
                table.budget -= hi + 1 - lo
                return []
            table.budget -= q + 1 - lo
            p = q - anchor
            return [p] if hay[p : p + size] == wanted else []
        positions = table.positions(line)
        first = bisect.bisect_left(positions, lo)
        stop = bisect.bisect_right(positions, hi)
        found: list[int] = []
        for q in positions[first:stop]:
            p = q - anchor
            if hay[p : p + size] == wanted:
                found.append(p)
        return found

    def find_first_pass(
        self,
        needle: Sequence[str],
        start: int = 0,
        end: int | None = None,
        passes: Sequence[MatchPass] = LINE_PASSES,
    ) -> tuple[MatchPass | None, list[int]]:
        """The loosest-necessary pass and its matches: the first pass with any match wins."""
        for match_pass in passes:
            found = self.find(needle, match_pass, start, end)
            if found:
                return match_pass, found
        return None, []

    def line_starts_with(self, prefix: str, start: int, match_pass: MatchPass) -> int | None:
        """First line at or after ``start`` whose normalised text starts with ``prefix``."""
        norm = NORMALISERS[match_pass]
        wanted = norm(prefix).strip()
        hay = self.normalised(match_pass)
        for i in range(start, len(hay)):
            if hay[i].strip().startswith(wanted):
                return i
        return None


IndentShift = tuple[Literal["add", "remove"], str]


def leading_whitespace(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def indent_shift(old: Sequence[str], matched: Sequence[str]) -> IndentShift | None:
    """The one indentation change that maps ``old`` onto ``matched``, or None if none does.

    Used when a match ignored leading whitespace: the replacement lines are
    moved by the same shift, so a model's dedented snippet lands at the file's
    indentation. ``("add", "")`` is the identity.
    """
    shifts: set[IndentShift] = set()
    for want, have in zip(old, matched, strict=True):
        if not want.strip():
            continue
        o, c = leading_whitespace(want), leading_whitespace(have)
        if c.endswith(o):
            shifts.add(("add", c[: len(c) - len(o)]))
        elif o.endswith(c):
            shifts.add(("remove", o[: len(o) - len(c)]))
        else:
            return None
    if len(shifts) > 1:
        return None
    return shifts.pop() if shifts else ("add", "")


def apply_shift(line: str, shift: IndentShift) -> str | None:
    """``line`` moved by ``shift``; None when a removal does not fit this line."""
    kind, unit = shift
    if not line.strip() or not unit:
        return line
    if kind == "add":
        return unit + line
    return line[len(unit) :] if line.startswith(unit) else None


def closest_excerpt(lines: Sequence[str], needle: Sequence[str], *, context: int = 2) -> str:
    """Numbered current lines most like ``needle``, for a model to re-read.

    Scores windows by how many needle lines they contain (whitespace and
    typography folded); falls back to fuzzy similarity of the first non-blank
    needle line. Bounded so a failure on a huge file stays cheap.
    """
    if not lines:
        return "(the file is empty)"
    wanted = [_typographic(x) for x in needle if x.strip()]
    index: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        index.setdefault(_typographic(line), []).append(i)
    votes: dict[int, int] = {}
    for k, w in enumerate(wanted):
        for i in index.get(w, [])[:200]:
            start = max(0, i - k)
            votes[start] = votes.get(start, 0) + 1
    if votes:
        best = max(votes, key=lambda s: (votes[s], -s))
    else:
        best = 0
        if wanted:
            sample = [_typographic(x) for x in lines[:20000]]
            close = difflib.get_close_matches(wanted[0], sample, n=1, cutoff=0.3)
            if close:
                best = sample.index(close[0])
    lo = max(0, best - context)
    hi = min(len(lines), best + max(len(needle), 1) + context)
    width = len(str(hi))
    return "\n".join(f"{n + 1:>{width}} | {lines[n]}" for n in range(lo, hi))


def _blank_edges(parts: list[str]) -> tuple[int, int]:
    lead = 0
    while lead < len(parts) and not parts[lead].strip():
        lead += 1
    trail = 0
    while trail < len(parts) - lead and not parts[len(parts) - 1 - trail].strip():
        trail += 1
    return lead, trail


def _split_terminated(text: str) -> tuple[list[str], bool]:
    parts = text.split("\n")
    if len(parts) > 1 and parts[-1] == "":
        return parts[:-1], True
    return parts, False


def trim_blank_edges(old: str, new: str) -> tuple[str, str] | None:
    """The last tier of ``file_patch``: ``old`` without blank lines at its start or end.

    Models often copy a stray blank line above or below the text they mean; when
    no earlier tier matched, the edit is retried without those lines. ``new``
    loses the same blank lines where it has them too (they were the same stray
    context), so the file's own blank lines stay as they were. None when ``old``
    has no blank edge line or is nothing but blank lines.

    Blank lines are dropped as whole lines, never their line endings alone, so
    the tier never joins or splits lines: when blank lines are dropped from
    the end of ``old``, the last line kept ends with its line ending, and the
    trimmed ``new`` ends with one too (``"\nbeta\ngamma\n\n"`` ->
    ``"BETA\nGAMMA"`` replaces the two lines with two lines, instead of
    joining ``GAMMA`` with the line after them).
    """
    old_parts, old_nl = _split_terminated(old)
    lead, trail = _blank_edges(old_parts)
    if (lead == 0 and trail == 0) or lead + trail >= len(old_parts):
        return None
    core = old_parts[lead : len(old_parts) - trail]
    new_parts, new_nl = _split_terminated(new)
    new_lead, _ = _blank_edges(new_parts)
    drop_lead = min(lead, new_lead)
    rest = new_parts[drop_lead:]
    drop_trail = 0  # trailing blanks of what is left, at most as many as old had
    while drop_trail < min(trail, len(rest)) and not rest[len(rest) - 1 - drop_trail].strip():
        drop_trail += 1
    new_core = rest[: len(rest) - drop_trail]
    # A blank line followed the last kept line of ``old``: that line was terminated,
    # and the lines replacing it keep that ending.
    old_terminated = old_nl or trail > 0
    new_terminated = bool(new_core) and (new_nl or trail > 0)
    return (
        "\n".join(core) + ("\n" if old_terminated else ""),
        "\n".join(new_core) + ("\n" if new_terminated else ""),
    )
