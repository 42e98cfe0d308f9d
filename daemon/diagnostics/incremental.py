"""Re-checking a file after an edit by looking only at what changed.

The worker keeps, per file, its last version: the bytes it parsed, the
tree-sitter tree, the findings, and for Python the top-level statements.
After an edit (a new version of a file it knows), it aligns the two versions
line by line (``linediff``), tells tree-sitter which byte ranges changed and
re-parses incrementally (tree-sitter reuses every untouched subtree), and:

- a tree with an error anywhere falls back to the full check (a fresh parse
  and the exact parser), so every reported problem is the full check's own;
- a clean tree means no tree-sitter findings; languages without an exact
  parser are done;
- Python (whose exact parser, ``ast.parse``, costs ~60 us a line): when the
  previous version parsed cleanly, only the top-level statements whose text
  is new are parsed, each alone. A module is a sequence of statements, so the
  file parses iff each of them does; any statement that fails sends the file
  to the full check, which then reports exactly what it always reports;
- JSON, TOML and YAML: their exact parser runs over the whole file (C speed
  for JSON and YAML; TOML files are small).

The property test in ``tests/daemon/diagnostics/test_incremental.py`` checks
over random edits that this gives exactly the full check's answer.
"""

from __future__ import annotations

import ast
import warnings
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate

import tree_sitter

from airlock.daemon.diagnostics import precise
from airlock.daemon.diagnostics.linediff import Region
from airlock.daemon.diagnostics.model import Finding


@dataclass
class SyntaxState:
    """One language's view of one version of a file."""

    tree: tree_sitter.Tree | None  # None: Python re-checked without tree-sitter
    findings: list[Finding]
    partition: list[tuple[int, int]] | None = None
    """Python, for a version ``ast`` accepts: each top-level statement's line range
    (0-based, half-open), in order; None when unknown."""


@dataclass
class Version:
    """One version of a file as the worker last saw it."""

    text: str  # LF-normalised, BOM stripped
    lines: list[str]  # text.split("\n")
    syntax: dict[str, SyntaxState] = field(default_factory=dict)
    _data: bytes | None = None

    @property
    def data(self) -> bytes:
        """The UTF-8 the tree-sitter parsers see (encoded on first use)."""
        if self._data is None:
            self._data = self.text.encode("utf-8")
        return self._data

    def byte_lengths(self) -> list[int]:
        if self.text.isascii():
            return list(map(len, self.lines))
        return [len(line.encode("utf-8")) for line in self.lines]


class _Starts:
    """Byte offset of each line's start: cumulative lengths plus one newline per line."""

    def __init__(self, version: Version) -> None:
        self._lengths = list(accumulate(version.byte_lengths(), initial=0))

    def __getitem__(self, row: int) -> int:
        return self._lengths[row] + row


def edit_tree(tree: tree_sitter.Tree, old: Version, new: Version, found: Sequence[Region]) -> bool:
    """Describe ``found`` to ``tree`` (from the last region back, so offsets stay valid).

    False (tree untouched) when a region reaches the end of either version:
    whole-line offsets do not describe a change of the final newline; the
    caller parses afresh.
    """
    if any(oe >= len(old.lines) or ne >= len(new.lines) for _, oe, _, ne in found):
        return False
    old_starts, new_starts = _Starts(old), _Starts(new)
    for os_, oe, ns, ne in reversed(found):
        start = old_starts[os_]
        tree.edit(
            start_byte=start,
            old_end_byte=old_starts[oe],
            new_end_byte=start + new_starts[ne] - new_starts[ns],
            start_point=(os_, 0),
            old_end_point=(oe, 0),
            new_end_point=(os_ + ne - ns, 0),
        )
    return True


def partition_of(tree: tree_sitter.Tree) -> list[tuple[int, int]] | None:
    """Top-level statement line ranges from a tree without errors, or None when one does not
    start a line (``ast`` rejects an indented first statement that tree-sitter accepts)."""
    if tree.root_node.has_error:
        return None
    out: list[tuple[int, int]] = []
    for child in tree.root_node.children:
        if child.type == "comment":
            continue
        (row, column), (end_row, end_column) = child.start_point, child.end_point
        if column != 0:
            return None
        out.append((row, end_row + 1 if end_column else max(end_row, row + 1)))
    return out


def python_recheck(
    partition: Sequence[tuple[int, int]], lines: Sequence[str], found: Sequence[Region]
) -> list[tuple[int, int]] | None:
    """The new version's partition when it still parses, else None (check in full).

    The previous version parsed and ``partition`` holds its top-level
    statements. Each changed region is widened to the whole statements it
    touches; the new text of each widened chunk must parse alone. A module is
    a sequence of statements, each chunk ends at a statement boundary, and the
    untouched statements parsed before: so the file parses iff every chunk does.
    """
    chunks: list[list[int]] = []  # [old_start, old_end, new_start, new_end]
    starts_ = [s for s, _ in partition]
    for os_, oe, ns, ne in found:
        lo, hi = os_, oe
        index = max(bisect_right(starts_, os_) - 1, 0)
        while index < len(partition) and partition[index][0] < max(oe, os_ + 1):
            s0, e0 = partition[index]
            touched = (s0 < oe and e0 > os_) if oe > os_ else (s0 < os_ < e0)
            if touched:
                lo, hi = min(lo, s0), max(hi, e0)
            index += 1
        new_lo, new_hi = lo + (ns - os_), hi + (ne - oe)
        if chunks and lo <= chunks[-1][1]:  # overlaps the previous chunk: one chunk
            chunks[-1][1], chunks[-1][3] = max(chunks[-1][1], hi), max(chunks[-1][3], new_hi)
        else:
            chunks.append([lo, hi, new_lo, new_hi])
    new_partition: list[tuple[int, int]] = []
    shift = 0
    at = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lo, hi, new_lo, new_hi in chunks:
            while at < len(partition) and partition[at][1] <= lo:
                s0, e0 = partition[at]
                new_partition.append((s0 + shift, e0 + shift))
                at += 1
            while at < len(partition) and partition[at][0] < hi:
                at += 1
            source = "\n".join(lines[new_lo:new_hi])
            try:
                module = ast.parse(source)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None
            for node in module.body:
                first_line = min(
                    [node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]
                )
                end = node.end_lineno or node.lineno
                new_partition.append((new_lo + first_line - 1, new_lo + end))
            shift = new_hi - hi
        while at < len(partition):
            s0, e0 = partition[at]
            new_partition.append((s0 + shift, e0 + shift))
            at += 1
    return new_partition


def precise_needed(language: str) -> bool:
    return language in precise.POLICIES
