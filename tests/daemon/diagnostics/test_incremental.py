"""The incremental re-check gives exactly the full check's answer (property test).

A worker that keeps each file's last version (and re-checks only what
changed) and a worker that checks every version in full see the same
sequence of random edits; after every edit their answers must be identical,
finding for finding, for ``syntax`` and ``whitespace``. The baseline
subtraction (``new_findings``) runs on these lists, so equal lists mean equal
"new problems".
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airlock.daemon.diagnostics import linediff
from airlock.daemon.diagnostics.baseline import new_findings
from airlock.daemon.diagnostics.model import finding
from airlock.daemon.diagnostics.worker import Worker
from tests.daemon.diagnostics.test_linediff import assert_alignment

PY_LINES = [
    "def f(x):",
    "    return x",
    "    return x  ",
    "\treturn x",
    "",
    "x = 1",
    "y = (1,",
    "     2)",
    "class C:",
    "    pass",
    "    def m(self):",
    "        return 1",
    "if x:",
    "else:",
    "z = [",
    "]",
    "'''",
    "# comment ",
    "print(x)",
    "x = (",
    "def (",
    "<<<<<<< HEAD",
    "=======",
    ">>>>>>> branch",
    "from __future__ import annotations",
    "@decorator",
    "a = 1; b = 2",
    "lambda: (yield)",
    "return 5",
    "async def g():",
    "    await x",
    "match x:",
    "    case 1:",
    "        pass",
    "type X = int",
    "s = f'{x!r}'",
    "  indented = 1",
]
JSON_LINES = ["{", "}", '  "a": 1,', '  "b": [1, 2],', '  "c": {', "  },", "  // c", "]", ""]

line_lists = st.lists(st.sampled_from(PY_LINES), min_size=0, max_size=40)
edits = st.lists(
    st.tuples(
        st.integers(0, 60), st.integers(0, 6), st.lists(st.sampled_from(PY_LINES), max_size=5)
    ),
    min_size=1,
    max_size=6,
)


def _apply(lines: list[str], edit: tuple[int, int, list[str]]) -> list[str]:
    at, removed, added = edit
    at = min(at, len(lines))
    return lines[:at] + added + lines[at + removed :]


def _results(answer: dict[str, Any]) -> dict[str, Any]:
    return {
        k: (v.get("applicable"), v.get("findings"), v.get("error"))
        for k, v in answer["results"].items()
    }


def _compare(
    name: str, versions: list[str], checks: tuple[str, ...] | list[str] = ("syntax", "whitespace")
) -> None:
    fast, full = Worker(), Worker(incremental=False)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        for text in versions:
            path.write_text(text)
            req = {"path": str(path), "display": name, "checks": list(checks)}
            data = text.encode()
            got, want = fast.handle(req, data), full.handle(req, data)
            assert got["state"] == want["state"]
            if want["state"] == "ok":
                assert _results(got) == _results(want), text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=line_lists, steps=edits, final_newline=st.booleans())
def test_incremental_python_equals_full(
    base: list[str], steps: list[tuple[int, int, list[str]]], final_newline: bool
) -> None:
    versions = []
    lines = base
    for step in steps:
        versions.append("\n".join(lines) + ("\n" if final_newline else ""))
        lines = _apply(lines, step)
    versions.append("\n".join(lines) + ("\n" if final_newline else ""))
    _compare("m.py", versions)
    _compare("notes.txt", versions)
    _compare("README.md", versions)


NESTED_BASES = [
    "def f(a, b):\n    x = a + b\n    if x:\n        y = 1\n    elif b:\n        y = 2\n"
    "    else:\n        y = 3\n\n    return y\n",
    "class C:\n    @staticmethod\n    def m(x):\n        try:\n            return x\n"
    "        except ValueError:\n            pass\n        finally:\n            z = 0\n\n"
    "    def n(self):\n        for i in range(3):\n            with open(i) as fh:\n"
    "                data = fh.read()\n        else:\n            done = True\n"
    "        while False:\n            break\n",
    "def g(x):\n    match x:\n        case 1:\n            y = 1\n        case _:\n"
    "            pass\n    s = '''\n    text\n'''\n    total = 1 + \\\n        2\n    return s\n",
    "def t(x):\n\tif x:\n\t\treturn 1\n\t# tab comment\n\treturn 0\n",
    "def u(x):\n\tif x:\n\t    return 1\n\treturn 0\n",
    "async def v(q):\n    async with q as r:\n        await r\n    # trailing comment\n\n"
    "x = 1; y = 2\nif x: z = 3\n",
    "def w(): \\\n    return 1\n",
    "@decorator\ndef d():\n    '''doc\n    string'''\n    return f'{x!r}'\n",
    "try:\n    import a\nexcept ImportError:\n    a = None\n",
]
NESTED_LINES = [
    *("", "    ", "# c", "    # c", "        # c", "x = 1", "    x = 1", "        x = 1"),
    *("            x = 1", "  x = 1", "\tx = 1", "\t\tx = 1", "\t    x = 1", "    if x:"),
    *("        if x:", "    elif y:", "        elif y:", "    else:", "        else:", "else:"),
    *("    try:", "        try:", "    except E:", "        except E:", "    finally:"),
    *("        finally:", "    for i in r:", "        for i in r:", "    while x:"),
    *("    with a as b:", "        with a:", "    def g(self):", "        def h():", "    @dec"),
    *("        @dec", "    class K:", "    match x:", "        case 1:", "            case _:"),
    *("        return x", "            pass", "        pass", "    pass", "        break"),
    *("    y = (1,", "         2)", "    s = '''", "    '''", "'''", "    t = 1 + \\"),
    *("        2", "    a = 1; b = 2", "    if a: b = 1", "    z = [", "    ]", "    f'{x}'"),
    *('    """doc"""', "def k():", "class D:", "    nonlocal q", "    lambda: (yield)"),
]
STATEMENTS = [
    *("x = 1", "y = f(x)", "return x", "pass", "if x:", "else:", "z = (", ")", "'''"),
    *("a = 1; b = 2", "for i in r:", "@dec", "case 1:", "# c", "t = 1 + \\", "match x:"),
    *("elif x:", "except E:", "def h():", "nonlocal q", "s = '''a'''", "x = [1,"),
]
SIMPLE = [
    *("x = 1", "y = f(x)", "pass", "return x", "a = 1; b = 2", "s = '''a'''", "del x"),
    *("if x: pass", "for i in r: continue", "with a: pass", "x = [1,\n2]", "yield"),
]
HEADERS = ["if x:", "for i in r:", "while x:", "with a:", "def h():", "class K:", "try:"]
_kept_indent = st.sampled_from(["retext", "clone"])
nested_edits = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"),
            st.integers(0, 80),
            st.integers(0, 4),
            st.lists(st.sampled_from(NESTED_LINES), max_size=4),
        ),
        # a line's statement changed, or one inserted before it, at its indentation, or a
        # compound statement with a body inserted there: edits that often keep the file
        # parsing (weighted up), so the block-level path is exercised, and then break it
        st.tuples(_kept_indent, st.integers(0, 80), st.sampled_from(STATEMENTS)),
        *[st.tuples(_kept_indent, st.integers(0, 80), st.sampled_from(SIMPLE))] * 3,
        st.tuples(st.just("nest"), st.integers(0, 80), st.sampled_from(HEADERS)),
    ),
    min_size=1,
    max_size=8,
)


def _edit_nested(lines: list[str], edit: tuple[Any, ...]) -> list[str]:
    if edit[0] == "put":
        return _apply(lines, edit[1:])
    _, at, statement = edit
    if not lines:
        return [statement]
    at %= len(lines)
    if edit[0] != "nest":  # prefer a line that holds a simple statement (more edits parse)
        at = next((i for i in range(at, len(lines)) if lines[i].strip()[-1:] not in ":@"), at)
    line = lines[at]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    if edit[0] == "nest":
        tail = (
            "pass" if statement != "try:" else "pass\n" + indent + "finally:\n" + indent + " pass"
        )
        new = [indent + statement, indent + (indent[:1] or " ") * 2 + tail]
        return [*lines[:at], *"\n".join(new).split("\n"), *lines[at:]]
    new = (indent + statement).split("\n")
    if edit[0] == "retext":
        return [*lines[:at], *new, *lines[at + 1 :]]
    return [*lines[:at], *new, *lines[at:]]


def _nested_versions(
    base: list[str], steps: list[tuple[Any, ...]], final_newline: bool
) -> list[str]:
    lines = "\n".join(base).split("\n")
    end = "\n" if final_newline else ""
    # first a version that differs on every line: the step to the base learns the insides
    # of every statement (the first edit after a full check only learns what it touches)
    versions = ["\n".join(f"{x}  # w" if x and not x.endswith("\\") else x for x in lines)]
    for step in steps:
        versions.append("\n".join(lines) + end)
        lines = _edit_nested(lines, step)
    versions.append("\n".join(lines) + end)
    return versions


def over_nested_edits(max_examples: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Runs a test (hypothesis) over nested Python files (``base``), edits inside their
    bodies (``steps``) and both final-newline cases, ``max_examples`` of them."""

    def wrap(test: Callable[..., None]) -> Callable[..., None]:
        run = given(
            base=st.lists(st.sampled_from(NESTED_BASES), min_size=1, max_size=4),
            steps=nested_edits,
            final_newline=st.booleans(),
        )(test)
        limits = settings(
            max_examples=max_examples, deadline=None, suppress_health_check=[HealthCheck.too_slow]
        )
        return limits(run)

    return wrap


@over_nested_edits(250)
def test_incremental_nested_python_equals_full(
    base: list[str], steps: list[tuple[Any, ...]], final_newline: bool
) -> None:
    """Nested blocks at several depths, every compound statement, decorators, match,
    continuations, multi-line strings, tabs and spaces; edits inside bodies."""
    _compare("m.py", _nested_versions(base, steps, final_newline), ["syntax"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.lists(st.sampled_from(NESTED_BASES), min_size=1, max_size=3),
    steps=st.lists(
        st.tuples(_kept_indent, st.integers(0, 60), st.sampled_from(SIMPLE))
        | st.tuples(st.just("nest"), st.integers(0, 60), st.sampled_from(HEADERS)),
        min_size=1,
        max_size=8,
    ),
)
def test_incremental_python_body_edits_equal_full(
    base: list[str], steps: list[tuple[Any, ...]]
) -> None:
    """Long runs of edits that mostly keep the file parsing: the block-level path, its
    structure carried from edit to edit, and the edit that finally breaks the file."""
    _compare("m.py", _nested_versions(base, steps, True), ["syntax"])


@settings(max_examples=60, deadline=None)
@given(base=st.lists(st.sampled_from(JSON_LINES), max_size=20), steps=edits)
def test_incremental_json_equals_full(
    base: list[str], steps: list[tuple[int, int, list[str]]]
) -> None:
    versions = []
    lines = base
    pool = [JSON_LINES[i % len(JSON_LINES)] for i in range(10)]
    for at, removed, added in steps:
        versions.append("\n".join(lines) + "\n")
        lines = _apply(lines, (at, removed, [pool[len(x) % len(pool)] for x in added]))
    versions.append("\n".join(lines) + "\n")
    _compare("tsconfig.json", versions)
    _compare("data.json", versions)


@settings(max_examples=200, deadline=None)
@given(
    old=st.lists(st.sampled_from("abcdefgh"), max_size=40),
    new=st.lists(st.sampled_from("abcdefgh"), max_size=40),
)
def test_line_regions_describe_the_change(old: list[str], new: list[str]) -> None:
    """Outside the regions the two versions are equal line for line, in order."""
    assert_alignment(old, new, linediff.regions(old, new))


def test_the_fast_paths_are_taken(tmp_path: Path) -> None:
    """A clean edit of a large file re-checks incrementally (the full path is not hit)."""
    worker = Worker()
    body = "".join(f"def f_{k}(x):\n    return x + {k}\n\n" for k in range(400))
    path = tmp_path / "big.py"
    path.write_text(body)
    req = {"path": str(path), "display": "big.py", "checks": ["syntax", "whitespace"]}
    worker.handle(req, path.read_bytes())
    path.write_text(body.replace("x + 7\n", "x + 7 \n").replace("x + 300\n", "x * 300\n"))
    answer = worker.handle(req, path.read_bytes())
    assert worker.paths["syntax:incremental"] == 1 and worker.paths["whitespace:incremental"] == 1
    ws = answer["results"]["whitespace"]["findings"]
    assert [(f["line"], f["code"]) for f in ws] == [(23, "trailing-whitespace")]
    path.write_text(body.replace("x + 9\n", "x + (9\n"))
    broken = worker.handle(req, path.read_bytes())
    assert worker.paths["syntax:full"] == 2  # an error anywhere: the full check reports it
    assert broken["results"]["syntax"]["findings"]


def test_new_findings_are_the_same_from_equal_lists() -> None:
    """Sanity of the claim above: the subtraction depends on the lists only."""
    a = [finding(path="p", line=1, column=1, severity="warning", check="w", code="c", message="m")]
    assert new_findings(a, a) == []
