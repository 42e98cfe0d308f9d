"""Re-checking a file after an edit by looking only at what changed.

The worker keeps, per file, its last version: the bytes it parsed, the
tree-sitter tree, the findings, and for Python its statement structure.
After an edit (a new version of a file it knows), it aligns the two versions
line by line (``linediff``), tells tree-sitter which byte ranges changed and
re-parses incrementally (tree-sitter reuses every untouched subtree), and:

- a tree with an error anywhere falls back to the full check (a fresh parse
  and the exact parser), so every reported problem is the full check's own;
- a clean tree means no tree-sitter findings; languages without an exact
  parser are done;
- Python (whose exact parser, ``ast.parse``, costs ~60 us a line): when the
  previous version parsed cleanly, only the new text of the changed
  statements is parsed: the smallest run of whole statements within one block
  (``pyblocks``), else whole top-level statements, each alone. A block is a
  sequence of statements, so the file parses iff each piece does (the
  conditions are in ``python_recheck``); a piece that fails sends the file to
  the full check, which then reports exactly what it always reports;
- JSON, TOML and YAML: their exact parser runs over the whole file (C speed
  for JSON and YAML; TOML files are small).

The property test in ``tests/daemon/diagnostics/test_incremental.py`` checks
over random edits that this gives exactly the full check's answer.
"""

from __future__ import annotations

import ast
import importlib
import warnings
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

import tree_sitter

from . import pyblocks
from .linediff import Region
from .model import Finding


@dataclass
class SyntaxState:
    """One language's view of one version of a file."""

    tree: tree_sitter.Tree | None  # None: Python re-checked without tree-sitter
    findings: list[Finding]
    partition: pyblocks.Block | None = None
    """Python, for a version ``ast`` accepts: its statement structure (``pyblocks``);
    None when unknown."""


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


def partition_of(tree: tree_sitter.Tree) -> pyblocks.Block | None:
    """The module's top-level statements from a tree without errors (their insides are
    learnt from the first re-parse of each), or None when one starts a line anywhere
    but at its start (``ast`` rejects an indented first statement that tree-sitter
    accepts); statements sharing a line (``a = 1; b = 2``) are one unit."""
    if tree.root_node.has_error:
        return None
    out: list[tuple[int, int]] = []
    for child in tree.root_node.children:
        if child.type == "comment":
            continue
        (row, column), (end_row, end_column) = child.start_point, child.end_point
        if column != 0 and not (out and row < out[-1][1]):  # not after ``;`` on a shared line
            return None
        out.append((row, end_row + 1 if end_column else max(end_row, row + 1)))
    return pyblocks.module_of(out)


@dataclass
class PythonRecheck:
    """A Python file that still parses: its new structure, and what was re-parsed."""

    module: pyblocks.Block
    runs: int
    """Runs of statements re-parsed inside a block (the fine path)."""
    chunks: int
    """Chunks of top-level statements re-parsed (the coarse path)."""


_WRAPPER = "if 1:\n"
_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError)


def python_recheck(
    module: pyblocks.Block, lines: Sequence[str], found: Sequence[Region]
) -> PythonRecheck | None:
    """The new version's structure when it still parses, else None (check in full).

    The previous version parsed and ``module`` is its structure. Each changed
    region is widened to the smallest run of whole statements within one block
    that covers it (``pyblocks.locate``); the run's new text must parse alone
    under a synthetic ``if 1:`` header, its lines verbatim. Regions no block
    covers, and runs that fail any condition below, are widened instead to
    whole top-level statements whose new text must parse as a module (the
    coarse path). Why the file then parses iff every re-parsed piece does:

    - a run starts at a statement's first line, at the block's exact
      indentation string, after a line that does not end with a backslash, and
      ends where the next statement of its block starts (or at the block's last
      statement's end): the tokenizer is between logical lines, outside brackets
      and strings, at both ends, in the old version and (the lines around the
      run are unchanged: runs that touch another piece are re-parsed coarsely)
      in the new one;
    - the new text's first line has that same indentation, and its parse under
      the header is one ``if`` whose body starts on that line, with no ``else``
      (no continuation clause crossed the run's end; a dedent out of the block
      would end the ``if`` early, making a second module statement or an error);
      the text does not end with a backslash. Its tokens are then whole
      statements of the block, and statements of a block can be replaced by
      others;
    - every indentation involved (the enclosing blocks', the run's lines) is
      pure spaces or pure tabs, the same character throughout, so CPython's
      two-tab-size consistency check (TabError) agrees in both contexts;
    - ``ast.parse`` has no context-dependent rules (``return`` outside a
      function is the compiler's error, not the parser's).

    Anything else falls back: decorated statements in a run, ``match``, blocks
    on the header's line, a run left with no statement, a ``\\r`` in the text.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _recheck(module, lines, found)
    except RecursionError:
        return None


def _recheck(
    module: pyblocks.Block, lines: Sequence[str], found: Sequence[Region]
) -> PythonRecheck | None:
    runs: list[pyblocks.Run] = []
    coarse: list[Region] = []
    for region in found:
        os_, oe = region[0], region[1]
        run = pyblocks.locate(module, os_, max(oe, os_ + 1))
        if run is None:
            coarse.append(region)
        else:
            if region[2] == region[3]:
                pyblocks.widen_deletion(run)
            run.regions.append(region)
            _place(runs, run, coarse)
    pieces: list[tuple[pyblocks.Run, pyblocks.Block]] = []
    for run in runs:
        piece = _reparse_run(run, lines)
        if piece is None:
            coarse.extend(run.regions)
        else:
            pieces.append((run, piece))
    while True:  # a run next to a coarse chunk goes coarse (its neighbours must be unchanged)
        coarse.sort()
        chunks = _chunks(module, coarse)
        los = [c[0] for c in chunks]
        kept: list[tuple[pyblocks.Run, pyblocks.Block]] = []
        for run, piece in pieces:
            at = bisect_right(los, run.end) - 1
            if at >= 0 and chunks[at][1] >= run.start:
                coarse.extend(run.regions)
            else:
                kept.append((run, piece))
        if len(kept) == len(pieces):
            break
        pieces = kept
    changes: list[pyblocks.Change] = []
    next_piece = 0
    for lo, hi, new_lo, new_hi in chunks:
        while next_piece < len(pieces) and pieces[next_piece][0].start < lo:
            _add_run(changes, *pieces[next_piece])
            next_piece += 1
        source = "\n".join(lines[new_lo:new_hi])
        if "\r" in source:  # a line break to Python, not to ``lines``
            return None
        try:
            tree = ast.parse(source)
        except _PARSE_ERRORS:
            return None
        piece = pyblocks.module_units(tree.body, lines, new_lo, new_lo)
        i = bisect_right(module.ends, lo)
        j = max(i, bisect_left(module.starts, hi))
        changes.append(pyblocks.Replace(i, j, lo, piece, (new_hi - new_lo) - (hi - lo)))
    for run, piece in pieces[next_piece:]:
        _add_run(changes, run, piece)
    new_module, _ = pyblocks.rebuild(module, changes)
    return PythonRecheck(new_module, len(pieces), len(chunks))


def _place(runs: list[pyblocks.Run], run: pyblocks.Run, coarse: list[Region]) -> None:
    """Add ``run`` (in file order): runs of one block that meet become one; a run inside
    another joins it; runs of different blocks that meet both go coarse."""
    while runs and run.start <= runs[-1].end:
        last = runs[-1]
        if last.path == run.path:
            runs.pop()
            last.i, last.j = min(last.i, run.i), max(last.j, run.j)
            last.start, last.end = min(last.start, run.start), max(last.end, run.end)
            last.regions += run.regions
            run = last
        elif last.start <= run.start and run.end <= last.end:
            last.regions += run.regions
            return
        elif run.start <= last.start and last.end <= run.end:
            runs.pop()
            run.regions[:0] = last.regions
        else:
            runs.pop()
            coarse.extend(last.regions + run.regions)
            return
    runs.append(run)


def _new_range(run: pyblocks.Run) -> tuple[int, int]:
    first, last = run.regions[0], run.regions[-1]
    return run.start + first[2] - first[0], run.end + last[3] - last[1]


def _reparse_run(run: pyblocks.Run, lines: Sequence[str]) -> pyblocks.Block | None:
    """The run's new units (positions relative to its new start) when its new text parses
    as statements of its block; None on failure or doubt (the coarse path then)."""
    start, end = _new_range(run)
    if start >= end:
        return None
    indent = run.block.indent
    text = lines[start:end]
    first = text[0]
    if not first.startswith(indent) or first[len(indent) : len(indent) + 1] in _NOT_CODE:
        return None
    kind = indent[0]
    for line in text[1:]:  # the first line's indentation is the block's: pure
        if line[:1] in _INDENTATION and not pyblocks.pure(pyblocks.leading(line), kind):
            return None
    if text[-1].endswith("\\"):
        return None
    source = _WRAPPER + "\n".join(text)
    if "\r" in source:
        return None
    if len(text) == 1 and _PARSE_ONLY is not None:
        # One line, indented, under the header: if it parses it is the header's whole
        # body, one unit with no qualifying block (a block on its header's line is not
        # entered). So the verdict is all that is needed, and the parser without the
        # Python AST objects (the symbol table pass, whose extra errors, such as a
        # module-level ``nonlocal``, only send the line to ``ast`` below) gives it at a
        # third of the cost.
        try:
            _PARSE_ONLY(source, "<unknown>", "exec")
            return _ONE_LINE
        except _PARSE_ERRORS:
            pass
    try:
        tree = ast.parse(source)
    except _PARSE_ERRORS:
        return None
    body = tree.body
    if len(body) != 1 or not isinstance(body[0], ast.If) or body[0].orelse:
        return None
    wrapper = body[0]
    if wrapper.body[0].lineno != 2 or (wrapper.end_lineno or 0) > len(text) + 1:
        return None
    piece = pyblocks.build_block(wrapper.body, lines, start - 1, start, "", indent)
    if piece is None or any(piece.whole):
        return None
    return piece


def _parse_only() -> Callable[[str, str, str], object] | None:
    """CPython's ``_symtable.symtable``: parses (and builds a symbol table) without
    creating Python AST objects; None elsewhere."""
    try:
        module = importlib.import_module("_symtable")
    except ImportError:
        return None
    function = getattr(module, "symtable", None)
    return function if callable(function) else None


_PARSE_ONLY = _parse_only()
_ONE_LINE = pyblocks.Block("", [0], [1], [()], [False])
"""The piece of a one-line run (shared: pieces are only read)."""
_NOT_CODE = ("", " ", "\t", "\f", "#")
_INDENTATION = (" ", "\t", "\f")


def _add_run(changes: list[pyblocks.Change], run: pyblocks.Run, piece: pyblocks.Block) -> None:
    start, end = _new_range(run)
    delta = (end - start) - (run.end - run.start)
    at = run.start - run.base
    if delta == 0 and pyblocks.same_units(run.block, run.i, run.j + 1, piece, at):
        return
    pyblocks.add_change(changes, run.path, pyblocks.Replace(run.i, run.j + 1, at, piece, delta))


def _chunks(module: pyblocks.Block, found: Sequence[Region]) -> list[tuple[int, int, int, int]]:
    """Each region widened to the whole top-level statements it touches, overlapping ones
    merged: ``(old_start, old_end, new_start, new_end)``."""
    chunks: list[list[int]] = []
    starts, ends = module.starts, module.ends
    for os_, oe, ns, ne in found:
        lo, hi = os_, oe
        index = max(bisect_right(starts, os_) - 1, 0)
        while index < len(starts) and starts[index] < max(oe, os_ + 1):
            s0, e0 = starts[index], ends[index]
            touched = (s0 < oe and e0 > os_) if oe > os_ else (s0 < os_ < e0)
            if touched:
                lo, hi = min(lo, s0), max(hi, e0)
            index += 1
        new_lo, new_hi = lo + (ns - os_), hi + (ne - oe)
        if chunks and lo <= chunks[-1][1]:  # overlaps the previous chunk: one chunk
            chunks[-1][1], chunks[-1][3] = max(chunks[-1][1], hi), max(chunks[-1][3], new_hi)
        else:
            chunks.append([lo, hi, new_lo, new_hi])
    return [(c[0], c[1], c[2], c[3]) for c in chunks]
