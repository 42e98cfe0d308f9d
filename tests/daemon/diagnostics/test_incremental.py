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
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airlock.daemon.diagnostics import linediff
from airlock.daemon.diagnostics.baseline import new_findings
from airlock.daemon.diagnostics.model import finding
from airlock.daemon.diagnostics.worker import Worker

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


def _compare(name: str, versions: list[str]) -> None:
    fast, full = Worker(), Worker(incremental=False)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        for text in versions:
            path.write_text(text)
            req = {"path": str(path), "display": name, "checks": ["syntax", "whitespace"]}
            got, want = fast.handle(req), full.handle(req)
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
    found = linediff.regions(old, new)
    i = j = 0
    for os_, oe, ns, ne in found:
        assert old[i:os_] == new[j:ns]
        assert os_ - i == ns - j
        i, j = oe, ne
    assert old[i:] == new[j:]


def test_the_fast_paths_are_taken(tmp_path: Path) -> None:
    """A clean edit of a large file re-checks incrementally (the full path is not hit)."""
    worker = Worker()
    body = "".join(f"def f_{k}(x):\n    return x + {k}\n\n" for k in range(400))
    path = tmp_path / "big.py"
    path.write_text(body)
    req = {"path": str(path), "display": "big.py", "checks": ["syntax", "whitespace"]}
    worker.handle(req)
    path.write_text(body.replace("x + 7\n", "x + 7 \n").replace("x + 300\n", "x * 300\n"))
    answer = worker.handle(req)
    assert worker.paths["syntax:incremental"] == 1 and worker.paths["whitespace:incremental"] == 1
    ws = answer["results"]["whitespace"]["findings"]
    assert [(f["line"], f["code"]) for f in ws] == [(23, "trailing-whitespace")]
    path.write_text(body.replace("x + 9\n", "x + (9\n"))
    broken = worker.handle(req)
    assert worker.paths["syntax:full"] == 2  # an error anywhere: the full check reports it
    assert broken["results"]["syntax"]["findings"]


def test_new_findings_are_the_same_from_equal_lists() -> None:
    """Sanity of the claim above: the subtraction depends on the lists only."""
    a = [finding(path="p", line=1, column=1, severity="warning", check="w", code="c", message="m")]
    assert new_findings(a, a) == []
