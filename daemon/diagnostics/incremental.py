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

    tree: tree_sitter.Tree
    findings: list[Finding]
    statements: frozenset[bytes] | None = None
    """Python: the top-level statement texts of a version that parsed cleanly."""


@dataclass
class Version:
    """One version of a file as the worker last saw it."""

    data: bytes  # the LF-normalised UTF-8 the parsers saw
    lines: list[bytes]  # data.split(b"\n")
    syntax: dict[str, SyntaxState] = field(default_factory=dict)


class _Starts:
    """Byte offset of each line's start: cumulative lengths plus one newline per line."""

    def __init__(self, lines: Sequence[bytes]) -> None:
        self._lengths = list(accumulate(map(len, lines), initial=0))

    def __getitem__(self, row: int) -> int:
        return self._lengths[row] + row


def starts(lines: Sequence[bytes]) -> _Starts:
    return _Starts(lines)


def edit_tree(tree: tree_sitter.Tree, old: Version, new: Version, found: Sequence[Region]) -> bool:
    """Describe ``found`` to ``tree`` (from the last region back, so offsets stay valid).

    False (tree untouched) when a region reaches the end of either version:
    whole-line offsets do not describe a change of the final newline; the
    caller parses afresh.
    """
    if any(oe >= len(old.lines) or ne >= len(new.lines) for _, oe, _, ne in found):
        return False
    old_starts, new_starts = starts(old.lines), starts(new.lines)
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


def top_level(tree: tree_sitter.Tree, data: bytes) -> list[bytes] | None:
    """The text of each top-level statement, or None when one does not start a line
    (``ast`` rejects an indented first statement that tree-sitter accepts)."""
    out: list[bytes] = []
    for child in tree.root_node.children:
        if child.type == "comment":
            continue
        if child.start_point[1] != 0:
            return None
        out.append(data[child.start_byte : child.end_byte])
    return out


def python_statements_parse(statements: Sequence[bytes], known: frozenset[bytes]) -> bool:
    """True when every statement not in ``known`` parses alone."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for text in statements:
            if text in known:
                continue
            try:
                ast.parse(text.decode("utf-8"))
            except (SyntaxError, ValueError, RecursionError, MemoryError, UnicodeDecodeError):
                return False
    return True


def python_clean_statements(tree: tree_sitter.Tree, data: bytes) -> frozenset[bytes] | None:
    statements = top_level(tree, data)
    return None if statements is None else frozenset(statements)


def precise_needed(language: str) -> bool:
    return language in precise.POLICIES
