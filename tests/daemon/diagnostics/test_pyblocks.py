"""The block-level Python re-check: when it is taken, and each condition that refuses it.

Every case runs an incremental ``Worker`` beside a full one (``_check``): the
answers must be equal, and ``Worker.paths`` says which path the last edit
took. "syntax:python-block" counts runs of statements re-parsed inside a block
(the fine path), "syntax:python-toplevel" top-level chunks, "syntax:full" full
checks. A file's first incremental edit learns the insides of the top-level
statements it touches, so each case starts from a variant of the text that
differs on every line (``_warm``): the step to the text itself learns them all.
"""

from __future__ import annotations

import ast
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

from airlock.daemon.diagnostics import incremental, linediff
from airlock.daemon.diagnostics.pyblocks import Block
from airlock.daemon.diagnostics.syntax import SyntaxChecker
from airlock.daemon.diagnostics.worker import Worker
from tests.daemon.diagnostics.test_incremental import _nested_versions, over_nested_edits

BLOCK = "syntax:python-block"
TOP = "syntax:python-toplevel"
FULL = "syntax:full"


def _warm(text: str) -> str:
    """``text`` with a trailing comment on every line that can take one."""
    return "\n".join(
        line + "  # w" if line and not line.endswith("\\") else line for line in text.split("\n")
    )


def _check(tmp_path: Path, text: str, *edits: str) -> tuple[Counter[str], list[object]]:
    """The warm-up, ``text``, then ``edits`` through both workers (answers must be equal):
    the paths the last edit took and its findings."""
    fast, full = Worker(), Worker(incremental=False)
    path = tmp_path / "m.py"
    req = {"path": str(path), "display": "m.py", "checks": ["syntax"]}
    taken: Counter[str] = Counter()
    findings: list[object] = []
    for version in (_warm(text), text, *edits):
        before = Counter(fast.paths)
        path.write_text(version)
        data = path.read_bytes()
        got, want = fast.handle(req, data), full.handle(req, data)
        assert got["results"] == want["results"], version
        taken = fast.paths - before
        findings = got["results"]["syntax"]["findings"]
    return taken, findings


FUNC = """\
def f(a):
    if a:
        b = 1
    c = 2
    return c
"""


def test_the_bench_edit_takes_the_block_path(tmp_path: Path) -> None:
    """One line changed inside each of many functions: one small run each, no top-level
    statement re-parsed; then lines inserted (everything below moves) and the same
    edit again: the moved structure is still right."""
    body = "".join(
        f"def handler_{i}(request):\n"
        f'    """Handle."""\n'
        f"    value = request.get('v')\n"
        f"    if value is None:\n"
        f"        return None\n"
        f"    result = compute_K(value, {i})\n"
        f"    return result\n\n"
        for i in range(40)
    )
    taken, findings = _check(
        tmp_path,
        body,
        body.replace("compute_K", "compute_1"),
        body.replace("compute_K", "compute_2"),
    )
    assert taken == Counter({BLOCK: 40, "syntax:incremental": 1}) and findings == []
    grown = body.replace("        return None\n", "        log(value)\n        return None\n", 3)
    taken, _ = _check(tmp_path, body, grown, grown.replace("compute_K", "compute_3"))
    assert taken[BLOCK] == 40 and not taken[TOP] and not taken[FULL]
    broken = grown.replace("compute_K(value, 39)", "compute_K(value, 39")
    taken, findings = _check(tmp_path, body, grown, broken)
    assert taken[FULL] == 1 and findings


def test_inserting_and_deleting_lines_in_a_body_take_the_block_path(tmp_path: Path) -> None:
    inserted = FUNC.replace("    c = 2\n", "    x = 3\n    c = 2\n")
    taken, _ = _check(tmp_path, FUNC, inserted)
    assert taken[BLOCK] == 1 and not taken[TOP]
    deleted = FUNC.replace("    c = 2\n", "")
    taken, _ = _check(tmp_path, FUNC, deleted)
    assert taken[BLOCK] == 1 and not taken[TOP]


def test_clause_blocks_move_with_the_edits_before_them(tmp_path: Path) -> None:
    """Lines inserted in an ``if`` body move its ``elif``/``else`` blocks (and a ``try``'s
    handlers and ``finally``); the next edit inside those still takes the block path and
    lands on the right statements (a wrong line range would re-parse the wrong text)."""
    text = (
        "def f(a):\n    if a:\n        b = 1\n    elif a > 1:\n        b = 2\n"
        "    else:\n        b = 3\n    try:\n        c = b\n    except E:\n"
        "        c = 0\n    finally:\n        d = 1\n    return c\n"
    )
    grown = text.replace("        b = 1\n", "        b = 1\n        b += 1\n")
    steps = [grown]
    for old, new in (("b = 3", "b = 4"), ("c = 0", "c = -1"), ("d = 1", "d = 2")):
        steps.append(steps[-1].replace(old, new))
        taken, findings = _check(tmp_path, text, *steps)
        assert taken[BLOCK] == 1 and not taken[TOP] and findings == []
    taken, findings = _check(tmp_path, text, *steps, steps[-1].replace("d = 2", "d = (2"))
    assert taken[FULL] == 1 and findings


def test_a_re_parsed_compound_statement_brings_its_new_blocks(tmp_path: Path) -> None:
    """Same lines, new insides (the body re-indented): the structure takes the new body,
    so the next edit in it is a block run at the new indentation."""
    moved = FUNC.replace("    if a:\n        b = 1", "    if a:  # c\n            b = 1")
    taken, _ = _check(tmp_path, FUNC, moved, moved.replace("b = 1", "b = 2"))
    assert taken[BLOCK] == 1 and not taken[TOP]


def test_a_new_first_line_at_another_indentation_is_not_a_block_run(tmp_path: Path) -> None:
    """``c = 2`` moved into the ``if`` body: valid, but its run is in the function's block."""
    taken, findings = _check(tmp_path, FUNC, FUNC.replace("    c = 2", "        c = 2"))
    assert not taken[BLOCK] and taken[TOP] == 1 and findings == []


def test_a_continuation_clause_crossing_the_run_end_is_not_a_block_run(tmp_path: Path) -> None:
    """An ``else`` after the run's last statement belongs to a statement outside the run:
    the wrapper's ``if`` takes it at column 0 (``orelse`` is checked) and rejects it
    deeper (a dedent the wrapper does not have)."""
    top = "if a:\n    b = 1\nc = 2\n"
    for clause in ("else:", "elif d:"):
        edited = top.replace("    b = 1\n", f"    b = 0\n{clause}\n    b = 2\n")
        taken, findings = _check(tmp_path, top, edited)
        assert not taken[BLOCK] and taken[TOP] == 1 and findings == []
    nested = FUNC.replace("        b = 1\n", "        b = 0\n    else:\n        b = 2\n")
    taken, findings = _check(tmp_path, FUNC, nested)
    assert not taken[BLOCK] and taken[TOP] == 1 and findings == []
    dedented = top.replace("    b = 1\n", "    b = 0\nz = 3\n")
    taken, findings = _check(tmp_path, top, dedented)
    assert not taken[BLOCK] and taken[TOP] == 1 and findings == []


def _module(text: str) -> Block:
    """The structure a worker would hold after learning every statement of ``text``."""
    lines = text.split("\n")
    empty = incremental.python_recheck(_top_level(text), lines, [(0, len(lines), 0, len(lines))])
    assert empty is not None
    return empty.module


def _top_level(text: str) -> Block:
    tree = SyntaxChecker().parser("python").parse(text.encode())
    module = incremental.partition_of(tree)
    assert module is not None
    return module


def test_runs_of_different_blocks_that_meet_go_coarse() -> None:
    """The line after a run must be unchanged: a run ending where another starts (here
    an insertion before ``c``, right after the ``if`` body's run) sends both coarse."""
    module = _module(FUNC)
    old = FUNC.split("\n")
    new = [*old[:2], "        b = 10", "    e = 5", *old[3:]]
    found = [(2, 3, 2, 3), (3, 3, 3, 4)]
    result = incremental.python_recheck(module, new, found)
    assert result is not None and (result.runs, result.chunks) == (0, 1)
    apart = incremental.python_recheck(module, [*new[:2], "        b = 10", *new[4:]], found[:1])
    assert apart is not None and (apart.runs, apart.chunks) == (1, 0)


def test_a_run_next_to_a_top_level_chunk_goes_coarse() -> None:
    """The run ends where the next top-level statement starts, which is re-parsed too
    (explicit regions: the worker's line alignment would merge the two)."""
    text = "def f():\n    x = 1\n    y = (1,\n         2)\nz = 3\n"
    module = _module(text)
    new = text.replace("(1,", "(10,").replace("z = 3", "z = 4").split("\n")
    result = incremental.python_recheck(module, new, [(2, 3, 2, 3), (4, 5, 4, 5)])
    assert result is not None and (result.runs, result.chunks) == (0, 1)
    alone = text.replace("(1,", "(10,").split("\n")
    result = incremental.python_recheck(module, alone, [(2, 3, 2, 3)])
    assert result is not None and (result.runs, result.chunks) == (1, 0)


def test_mixed_tabs_and_spaces_are_not_block_runs(tmp_path: Path) -> None:
    tabbed = "def t(x):\n\tx = 1\n\treturn x\n"
    nested = tabbed.replace("\tx = 1\n", "\tif x:\n\t    y = 1\n")  # valid, mixed
    taken, findings = _check(tmp_path, tabbed, nested)
    assert not taken[BLOCK] and taken[TOP] == 1 and findings == []
    spaces = tabbed.replace("\tx = 1\n", "\tx = 1\n        y = 1\n")  # a TabError
    taken, findings = _check(tmp_path, tabbed, spaces)
    assert not taken[BLOCK] and taken[FULL] == 1 and findings
    pure = tabbed.replace("\tx = 1\n", "\tif x:\n\t\ty = 1\n")
    taken, findings = _check(tmp_path, tabbed, pure)
    assert taken[BLOCK] == 1 and findings == []


def test_decorated_definitions_and_match_are_not_in_runs(tmp_path: Path) -> None:
    cls = "class C:\n    @staticmethod\n    def m(x):\n        return x\n\n    z = 1\n"
    taken, _ = _check(tmp_path, cls, cls.replace("@staticmethod", "@classmethod"))
    assert not taken[BLOCK] and taken[TOP] == 1
    taken, _ = _check(tmp_path, cls, cls.replace("return x", "return -x"))
    assert taken[BLOCK] == 1  # inside the decorated method's body: its own block
    taken, _ = _check(tmp_path, cls, cls.replace("    z = 1\n", "    @dec\n    def z(): pass\n"))
    assert not taken[BLOCK] and taken[TOP] == 1
    match = "def g(x):\n    match x:\n        case 1:\n            y = 1\n    return y\n"
    taken, _ = _check(tmp_path, match, match.replace("y = 1", "y = 2"))
    assert not taken[BLOCK] and taken[TOP] == 1


def test_backslash_continuations_are_not_run_boundaries(tmp_path: Path) -> None:
    """A body continued onto the next line is on its header's logical line: not a block
    (a second statement there is an unexpected indent, which must be reported)."""
    header = "def w(): \\\n    return 1\n\nz = 0\n"
    taken, findings = _check(
        tmp_path, header, header.replace("    return 1", "    x = 1\n    return x")
    )
    assert not taken[BLOCK] and taken[FULL] == 1 and findings
    trailing = "def f():\n    x = 1\n    y = 2\n\nz = 3\n"
    taken, findings = _check(tmp_path, trailing, trailing.replace("y = 2", "y = 2 \\"))
    assert not taken[BLOCK] and findings == []


def test_multiline_strings_are_re_parsed_whole(tmp_path: Path) -> None:
    text = 'def f():\n    s = """\n    a\n    """\n    return s\n'
    taken, findings = _check(tmp_path, text, text.replace("    a\n", "    x = 1\n"))
    assert taken[BLOCK] == 1 and findings == []
    taken, findings = _check(tmp_path, text, text.replace("    a\n", '    """\n'))
    assert not taken[BLOCK] and taken[FULL] == 1 and findings


def test_comments_at_block_ends_and_emptied_blocks_are_not_block_runs(tmp_path: Path) -> None:
    text = "def f():\n    x = 1\n    # end\ny = 2\n"
    taken, findings = _check(tmp_path, text, text.replace("    # end", "    z = 3"))
    assert not taken[BLOCK] and taken[FULL] == 1 and findings == []  # the top-level path
    # parses the changed line alone (it is between top-level statements) and gives up
    for emptied in (FUNC.replace("        b = 1\n", ""), FUNC.replace("b = 1", "# b")):
        taken, findings = _check(tmp_path, FUNC, emptied)
        assert not taken[BLOCK] and taken[FULL] == 1 and findings


def test_a_one_line_run_the_symbol_table_rejects_is_parsed_with_ast(tmp_path: Path) -> None:
    """``nonlocal`` is fine for the parser; the parse-only pass's symbol table is not."""
    text = "def f():\n    q = 1\n    def g():\n        x = 1\n    return g\n"
    taken, findings = _check(tmp_path, text, text.replace("x = 1", "nonlocal q"))
    assert taken[BLOCK] == 1 and findings == []


def _shape(block: Block) -> tuple[object, ...]:
    return (
        block.indent,
        block.starts,
        block.ends,
        [None if kids is None else [_shape(k) for k in kids] for kids in block.kids],
        block.whole,
    )


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


@over_nested_edits(200)
def test_the_carried_structure_is_the_fresh_one(
    base: list[str], steps: list[tuple[Any, ...]], final_newline: bool
) -> None:
    """After every edit the re-check accepts, ``ast`` accepts the file too, and the
    structure spliced from the small parses is exactly the one learnt from scratch: a
    line range off by one would make a later edit re-parse the wrong text."""
    versions = _nested_versions(base, steps, final_newline)
    module: Block | None = None
    for old, new in pairwise(versions):
        if module is None and _parses(old):
            module = _module(old)
        if module is None:
            continue
        old_lines, new_lines = old.split("\n"), new.split("\n")
        result = incremental.python_recheck(
            module, new_lines, linediff.regions(old_lines, new_lines)
        )
        if result is None:
            module = None
            continue
        assert _parses(new), new
        assert _shape(result.module) == _shape(_module(new)), new
        module = result.module


def test_dropping_a_blocks_last_statement_after_a_blank_line_ends_it_where_ast_does() -> None:
    """Found by the property above: deleting ``return y`` after a blank line left the
    function holding that blank line (its end moved by the lines removed, not to its new
    last statement), so a later edit would re-parse the wrong range."""
    body = "    x = a + b\n    if x:\n        y = 1\n    else:\n        y = 3\n"
    old = "def f(a, b):\n" + body + "\n    return y\n"
    new = "def f(a, b):\n" + body + "\n"
    module = _module(old)
    old_lines, new_lines = old.split("\n"), new.split("\n")
    result = incremental.python_recheck(module, new_lines, linediff.regions(old_lines, new_lines))
    assert result is not None
    assert _shape(result.module) == _shape(_module(new))
