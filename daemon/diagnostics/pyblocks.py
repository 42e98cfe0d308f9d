"""The statement structure of a Python file that ``ast`` accepts: blocks inside blocks.

The incremental syntax re-check (``incremental.python_recheck``) re-parses,
after an edit, the smallest run of whole statements *within one block* that
covers each changed line region, instead of the whole top-level statement
around it (a one-line change inside a method then costs one line of
``ast.parse``, not the class). That needs, per version, where every statement
is and which blocks it holds. This module keeps that structure and answers
"which run of statements covers these lines", and builds the next version's
structure from the small parses (untouched statements are moved, never
re-parsed).

Positions are 0-based line numbers, ends exclusive. A block's positions are
relative to the start of the statement that owns it (the module's are
absolute): moving a statement then moves everything inside it for free, and
an edit costs the units of the blocks on its path, not the file's statements.

Only blocks whose every statement starts its own line, at exactly the block's
indentation string, after a line that does not end with a backslash, with
pure indentation (all spaces or all tabs, the same character as every
enclosing block) are recorded: for those the argument in
``incremental.python_recheck`` holds. Anything else (``if x: pass`` bodies,
``match``, mixed tabs and spaces) is simply not entered: a change inside it
re-parses the whole statement that holds it.
"""

from __future__ import annotations

import ast
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

_INDENT_CHARS = " \t\f"


@dataclass(eq=False, slots=True)
class Block:
    """A block's statements ("units": statements sharing a line, ``a; b``, are one)."""

    indent: str
    """The indentation string of every unit's first line ("" for the module)."""
    starts: list[int]
    ends: list[int]
    kids: list[tuple[Block, ...] | None]
    """Each unit's inner blocks that qualify (relative to the unit's start); () for a
    simple statement or one not entered; None (module only): not known yet."""
    whole: list[bool]
    """Each unit is one a run may not hold (a decorated definition, whose start is its
    first decorator, or a ``match``): a change there re-parses its top-level statement."""


def leading(line: str) -> str:
    """The indentation the tokenizer sees: leading spaces, tabs and form feeds."""
    return line[: len(line) - len(line.lstrip(_INDENT_CHARS))]


def pure(indent: str, kind: str) -> bool:
    """``indent`` is made of ``kind`` (one space or one tab) only."""
    return not indent.replace(kind, "")


def module_of(ranges: Sequence[tuple[int, int]]) -> Block:
    """The module block from top-level line ranges (inner structure not known yet).

    Ranges that share a line (``a = 1; b = 2``) become one unit.
    """
    starts: list[int] = []
    ends: list[int] = []
    for start, end in ranges:
        if starts and start < ends[-1]:
            ends[-1] = max(ends[-1], end)
        else:
            starts.append(start)
            ends.append(end)
    return Block("", starts, ends, [None] * len(starts), [False] * len(starts))


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_COMPOUND = (
    *_DEFINITIONS,
    *(ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While, ast.If, ast.Try, ast.TryStar),
)
"""Statements with blocks (``match`` has none that are entered)."""


def _head(node: ast.stmt) -> tuple[int, bool, bool]:
    """A statement's first line (its first decorator's when it has some), whether it is
    decorated, and whether a run may not hold it (``Block.whole``)."""
    if isinstance(node, _DEFINITIONS) and node.decorator_list:
        return min(node.lineno, *(d.lineno for d in node.decorator_list)), True, True
    return node.lineno, False, isinstance(node, ast.Match)


def _new_units(
    nodes: Sequence[ast.stmt], line0: int, base: int, out: Block
) -> Iterator[tuple[ast.stmt, int, bool, bool, int]]:
    """``(node, first line, decorated, whole, end)`` for each statement that starts a unit
    of ``out``; one that shares its first line with the previous statement is merged into
    that unit here (``ends`` relative to ``base``)."""
    last = -1
    for node in nodes:
        first, decorated, whole = _head(node)
        first += line0 - 1
        end = line0 + (node.end_lineno or node.lineno)
        if first <= last:  # shares its first line with the previous statement: one unit
            out.ends[-1] = max(out.ends[-1], end - base)
            out.kids[-1] = ()
        else:
            yield node, first, decorated, whole, end
        last = end - 1


def _add_unit(
    out: Block,
    node: ast.stmt,
    lines: Sequence[str],
    line0: int,
    span: tuple[int, int],
    *,
    base: int,
    indent: str,
    whole: bool,
) -> None:
    """Appends the unit ``node`` (its first and end lines ``span``), positions relative to
    ``base``, with the inner blocks that qualify inside ``indent``."""
    first, end = span
    out.starts.append(first - base)
    out.ends.append(end - base)
    out.kids.append(
        inner_blocks(node, lines, line0, first, indent) if isinstance(node, _COMPOUND) else ()
    )
    out.whole.append(whole)


def module_units(nodes: Sequence[ast.stmt], lines: Sequence[str], line0: int, base: int) -> Block:
    """Top-level units of a parsed chunk (``line0``: the chunk's first line), inner blocks
    built; positions relative to ``base``."""
    out = Block("", [], [], [], [])
    for node, first, _, whole, end in _new_units(nodes, line0, base, out):
        _add_unit(out, node, lines, line0, (first, end), base=base, indent="", whole=whole)
    return out


def build_block(
    nodes: Sequence[ast.stmt],
    lines: Sequence[str],
    line0: int,
    base: int,
    parent_indent: str,
    indent: str | None = None,
) -> Block | None:
    """The block of ``nodes`` (positions relative to ``base``), or None when it does not
    qualify (see the module docstring). ``indent``: the indentation it must have."""
    out = Block("", [], [], [], [])
    for node, first, decorated, whole, end in _new_units(nodes, line0, base, out):
        text = lines[first]
        code = text.lstrip(_INDENT_CHARS)
        ws = text[: len(text) - len(code)]
        if indent is None:
            if (
                len(ws) <= len(parent_indent)
                or not ws.startswith(parent_indent)
                or not pure(ws, ws[0])
            ):
                return None
            indent = ws
        elif ws != indent:
            return None
        if decorated:
            if not code.startswith("@"):
                return None
        elif node.col_offset != len(ws):
            return None
        if first > 0 and lines[first - 1].endswith("\\"):
            return None
        _add_unit(out, node, lines, line0, (first, end), base=base, indent=ws, whole=whole)
    if indent is None:
        return None
    out.indent = indent
    return out


def inner_blocks(
    node: ast.stmt, lines: Sequence[str], line0: int, start: int, indent: str
) -> tuple[Block, ...]:
    """The blocks of statement ``node`` (which starts on line ``start``) that qualify."""
    groups: list[list[ast.stmt]]
    if isinstance(
        node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.With | ast.AsyncWith
    ):
        groups = [node.body]
    elif isinstance(node, ast.For | ast.AsyncFor | ast.While):
        groups = [node.body, node.orelse]
    elif isinstance(node, ast.If):
        groups = [node.body]
        orelse = node.orelse
        while (
            len(orelse) == 1 and isinstance(orelse[0], ast.If) and _is_elif(orelse[0], lines, line0)
        ):
            groups.append(orelse[0].body)
            orelse = orelse[0].orelse
        groups.append(orelse)
    elif isinstance(node, ast.Try | ast.TryStar):
        groups = [node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody]
    else:  # simple statements, and match (its case blocks are not entered)
        return ()
    out: list[Block] = []
    for group in groups:
        if group:
            block = build_block(group, lines, line0, start, indent)
            if block is not None:
                out.append(block)
    return tuple(out)


def _is_elif(node: ast.If, lines: Sequence[str], line0: int) -> bool:
    return lines[line0 + node.lineno - 1].startswith("elif", node.col_offset)


@dataclass(eq=False, slots=True)
class Run:
    """A run of whole statements, units ``i..j`` of one block, covering changed regions."""

    path: tuple[tuple[int, int], ...]
    """From the module: (unit index, inner block index) at each level down to ``block``."""
    block: Block
    i: int
    j: int
    start: int
    """Absolute old lines ``[start, end)``: unit i's start to unit j+1's start (or unit
    j's end when it is the block's last), so the old line after it starts a unit."""
    end: int
    base: int
    """Absolute old line of the owning statement's start (the block's positions' origin)."""
    regions: list[tuple[int, int, int, int]] = field(default_factory=list)


def locate(module: Block, lo: int, hi: int) -> Run | None:
    """The smallest run of whole statements inside some block (not the module) whose
    lines cover ``[lo, hi)``; None when there is none (the top-level path then)."""
    k = bisect_right(module.starts, lo) - 1
    if k < 0 or hi > module.ends[k]:
        return None
    kids = module.kids[k]
    if not kids:
        return None
    return _descend(kids, module.starts[k], lo, hi, (), k)


def _descend(
    kids: tuple[Block, ...],
    base: int,
    lo: int,
    hi: int,
    path: tuple[tuple[int, int], ...],
    unit: int,
) -> Run | None:
    for index, block in enumerate(kids):
        starts = block.starts
        if not (base + starts[0] <= lo and hi <= base + block.ends[-1]):
            continue
        here = (*path, (unit, index))
        i = bisect_right(starts, lo - base) - 1
        j = bisect_left(starts, hi - base) - 1
        inner = block.kids[i]
        if i == j and inner and hi <= base + block.ends[i]:
            found = _descend(inner, base + starts[i], lo, hi, here, i)
            if found is not None:
                return found
        if any(block.whole[i : j + 1]):
            return None
        end = starts[j + 1] if j + 1 < len(starts) else block.ends[j]
        return Run(here, block, i, j, base + starts[i], base + end, base)
    return None


def widen_deletion(run: Run) -> None:
    """A run whose region only deletes lines takes in a neighbouring statement of its block
    (the shorter of the next and the previous), so that its new text still holds one to
    parse: a block may lose statements, and when it would lose its last the run has no
    neighbour, its new text no statement, and it goes coarse."""
    block, starts = run.block, run.block.starts
    after = run.j + 1 < len(starts) and not block.whole[run.j + 1]
    before = run.i > 0 and not block.whole[run.i - 1]
    if after:
        nxt = starts[run.j + 2] if run.j + 2 < len(starts) else block.ends[run.j + 1]
        if before and starts[run.i] - starts[run.i - 1] < nxt - starts[run.j + 1]:
            after = False
        else:
            run.j += 1
            run.end = run.base + nxt
    if before and not after:
        run.i -= 1
        run.start = run.base + starts[run.i]


@dataclass(eq=False, slots=True)
class Replace:
    """Units ``[i, j)`` of a block give way to ``piece``'s, placed at old line ``at`` (relative
    to the block's origin) moved by the shifts before it; ``delta``: lines gained."""

    i: int
    j: int
    at: int
    piece: Block
    delta: int


@dataclass(eq=False, slots=True)
class Into:
    """Changes inside unit ``k``: per inner block index, that block's changes."""

    k: int
    blocks: dict[int, list[Replace | Into]] = field(default_factory=dict)


Change = Replace | Into


def add_change(changes: list[Change], path: Sequence[tuple[int, int]], change: Replace) -> None:
    """File ``change`` under the unit path it applies to (callers go in file order)."""
    for k, index in path:
        last = changes[-1] if changes else None
        if not isinstance(last, Into) or last.k != k:
            last = Into(k)
            changes.append(last)
        changes = last.blocks.setdefault(index, [])
    changes.append(change)


def rebuild(block: Block, changes: Sequence[Change], shift: int = 0) -> tuple[Block, int]:
    """``block`` after ``changes`` with every position moved by ``shift`` first; and the
    lines the changes gained. Untouched units are copied (their insides are shared);
    with nothing to do, ``block`` itself."""
    if not changes and not shift:
        return block, 0
    starts: list[int] = []
    ends: list[int] = []
    kids: list[tuple[Block, ...] | None] = []
    whole: list[bool] = []
    at = 0
    moved = shift
    for change in changes:
        if isinstance(change, Replace):
            _copy(block, at, change.i, moved, starts, ends, kids, whole)
            origin = change.at + moved
            piece = change.piece
            starts.extend([s + origin for s in piece.starts])
            ends.extend([e + origin for e in piece.ends])
            kids.extend(piece.kids)
            whole.extend(piece.whole)
            moved += change.delta
            at = change.j
            continue
        _copy(block, at, change.k, moved, starts, ends, kids, whole)
        inner = 0
        new_kids: list[Block] = []
        for index, kid in enumerate(block.kids[change.k] or ()):
            kid, gained = rebuild(kid, change.blocks.get(index, ()), inner)
            inner += gained
            new_kids.append(kid)
        starts.append(block.starts[change.k] + moved)
        ends.append(_unit_end(block, change.k, new_kids, moved, inner))
        kids.append(tuple(new_kids))
        whole.append(block.whole[change.k])
        moved += inner
        at = change.k + 1
    _copy(block, at, len(block.starts), moved, starts, ends, kids, whole)
    return Block(block.indent, starts, ends, kids, whole), moved - shift


def _unit_end(block: Block, k: int, new_kids: Sequence[Block], moved: int, inner: int) -> int:
    """Unit ``k``'s new end (it moves by ``moved`` and gains ``inner`` lines). Where it
    ended with its last inner block's last unit, it still does: a change that drops that
    block's last units must not leave the unit holding the blank lines that stood before
    them (``ast`` ends a compound statement at its last statement's last line)."""
    start, end = block.starts[k], block.ends[k]
    old = block.kids[k] or ()
    if old and new_kids and old[-1].ends and new_kids[-1].ends and start + old[-1].ends[-1] == end:
        return start + moved + new_kids[-1].ends[-1]
    return end + moved + inner


def same_units(block: Block, i: int, j: int, piece: Block, at: int) -> bool:
    """Units ``[i, j)`` of ``block`` are ``piece``'s placed at ``at``, neither side having
    inner blocks or units a run may not hold: replacing them changes nothing (a line edited in place,
    the common edit, then allocates nothing that outlives the check, which keeps the
    collector's full passes over the structure rare)."""
    if j - i != len(piece.starts) or any(piece.kids) or any(block.kids[i:j]):
        return False
    if any(piece.whole) or any(block.whole[i:j]):
        return False
    if j - i == 1:
        return block.starts[i] == at + piece.starts[0] and block.ends[i] == at + piece.ends[0]
    return [s + at for s in piece.starts] == block.starts[i:j] and [
        e + at for e in piece.ends
    ] == block.ends[i:j]


def _copy(
    block: Block,
    at: int,
    upto: int,
    moved: int,
    starts: list[int],
    ends: list[int],
    kids: list[tuple[Block, ...] | None],
    whole: list[bool],
) -> None:
    """Units ``[at, upto)`` of ``block``, moved by ``moved`` lines."""
    if moved:
        starts.extend([s + moved for s in block.starts[at:upto]])
        ends.extend([e + moved for e in block.ends[at:upto]])
    else:
        starts.extend(block.starts[at:upto])
        ends.extend(block.ends[at:upto])
    kids.extend(block.kids[at:upto])
    whole.extend(block.whole[at:upto])
