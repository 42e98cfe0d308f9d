"""Each output mode, on rg and on the grep fallback, with the same answers from both."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.search.engine import SearchEngine
from airlock.daemon.workspace import Workspace
from tests.daemon.search.support import Call, forced, make_workspace, write

TREE = {
    "src/app.py": "import os\n\ndef main():\n    return os.getcwd()  # TODO tidy\n\nmain()\n",
    "src/util.py": "def helper():\n    pass  # TODO\n",
    "src/web/index.ts": "export const todo = 'TODO: ship';\n",
    "docs/readme.md": "Nothing to do here.\nTODO one\nmiddle\nTODO two\n",
    ".hidden/conf.py": "TODO hidden\n",
    "README": "no marker\n",
}


@pytest.fixture(autouse=True)
def tree(ws: Path) -> None:
    write(ws, TREE)


async def test_files_with_matches_sorted(call: Call, engine: str) -> None:
    out = await call("file_search", {"pattern": "TODO"})
    assert out["mode"] == "files_with_matches"
    assert out["engine"] == engine
    assert out["files"] == [
        ".hidden/conf.py",
        "docs/readme.md",
        "src/app.py",
        "src/util.py",
        "src/web/index.ts",
    ]
    assert out["total"] == 5
    assert out["truncated"] is False
    assert out["matches"] is None and out["counts"] is None


async def test_content_mode_lines_and_context(call: Call) -> None:
    out = await call(
        "file_search", {"pattern": "TODO (one|two)", "output_mode": "content", "context": 1}
    )
    assert out["matches"] == [
        {
            "path": "docs/readme.md",
            "line": 2,
            "text": "TODO one",
            "context_before": ["Nothing to do here."],
            "context_after": ["middle"],
        },
        {
            "path": "docs/readme.md",
            "line": 4,
            "text": "TODO two",
            "context_before": ["middle"],
            "context_after": [],
        },
    ]


async def test_context_stops_at_neighbouring_match(call: Call, ws: Path) -> None:
    write(ws, {"n.txt": "a\nhit1\nhit2\nb\n"})
    out = await call(
        "file_search", {"pattern": "hit", "output_mode": "content", "context": 2, "path": "n.txt"}
    )
    rows = out["matches"]
    assert [(r["line"], r["context_before"], r["context_after"]) for r in rows] == [
        (2, ["a"], []),
        (3, [], ["b"]),
    ]


async def test_count_mode(call: Call) -> None:
    out = await call("file_search", {"pattern": "TODO", "output_mode": "count"})
    assert out["counts"] == [
        {"path": ".hidden/conf.py", "count": 1},
        {"path": "docs/readme.md", "count": 2},
        {"path": "src/app.py", "count": 1},
        {"path": "src/util.py", "count": 1},
        {"path": "src/web/index.ts", "count": 1},
    ]
    assert out["total"] == 5


async def test_glob_type_and_path(call: Call) -> None:
    by_glob = await call("file_search", {"pattern": "TODO", "glob": "*.py"})
    assert by_glob["files"] == [".hidden/conf.py", "src/app.py", "src/util.py"]
    negated = await call("file_search", {"pattern": "TODO", "glob": "!*.py"})
    assert negated["files"] == ["docs/readme.md", "src/web/index.ts"]
    by_type = await call("file_search", {"pattern": "TODO", "type": "ts"})
    assert by_type["files"] == ["src/web/index.ts"]
    under = await call("file_search", {"pattern": "TODO", "path": "src/web"})
    assert under["files"] == ["src/web/index.ts"]
    one_file = await call("file_search", {"pattern": "TODO", "path": "src/util.py"})
    assert one_file["files"] == ["src/util.py"]


async def test_case_and_fixed_strings(call: Call) -> None:
    assert (await call("file_search", {"pattern": "todo"}))["files"] == ["src/web/index.ts"]
    insensitive = await call("file_search", {"pattern": "todo", "case_insensitive": True})
    assert len(insensitive["files"]) == 5
    # No metacharacter: literal. With one: a regex unless fixed_strings says otherwise.
    dotted = await call("file_search", {"pattern": "os.getcwd()"})
    assert dotted["files"] == ["src/app.py"]
    literal = await call("file_search", {"pattern": "getcwd..", "fixed_strings": True})
    assert literal["files"] == []
    regex = await call("file_search", {"pattern": "getcwd.."})
    assert regex["files"] == ["src/app.py"]


async def test_no_matches(call: Call) -> None:
    out = await call("file_search", {"pattern": "zzz-not-there"})
    assert out["files"] == [] and out["total"] == 0 and out["truncated"] is False


async def test_git_directory_is_never_searched(call: Call, ws: Path) -> None:
    write(ws, {".git/config": "TODO in git\n", ".git/objects/x": "TODO\n"})
    out = await call("file_search", {"pattern": "TODO in git", "include_ignored": True})
    assert out["files"] == []


@pytest.mark.parametrize(
    "args",
    [
        {"pattern": "TODO"},
        {"pattern": "TODO", "output_mode": "count"},
        {"pattern": "TODO|Nothing", "output_mode": "content", "context": 2},
        {"pattern": "todo", "case_insensitive": True, "output_mode": "content"},
        {"pattern": "TODO", "glob": "src/**/*.ts"},
        {"pattern": "TODO", "limit": 2, "offset": 1},
        {"pattern": "TODO", "type": "py", "output_mode": "count"},
    ],
)
async def test_both_engines_give_identical_answers(
    monkeypatch: pytest.MonkeyPatch, ws: Path, tmp_path: Path, args: dict[str, Any]
) -> None:
    answers = []
    for name in ("rg", "grep"):
        workspace: Workspace = await forced(monkeypatch, ws, tmp_path / name, name)
        out = (await workspace.call("file_search", args)).model_dump(mode="json")
        assert out.pop("engine") == name
        answers.append(out)
    assert answers[0] == answers[1]
    assert answers[0][
        {"files_with_matches": "files", "content": "matches", "count": "counts"}[answers[0]["mode"]]
    ]


@pytest.mark.parametrize("mode", ["files_with_matches", "content", "count"])
async def test_grep_without_null_attributes_lines_to_the_right_files(
    ws: Path, tmp_path: Path, mode: str
) -> None:
    """A grep without --null prints "name:12:text"; names that look like such prefixes
    ("a", "a-1", "b:2") must still be told apart, by the known names in argument order."""
    grep = shutil.which("grep")
    assert grep is not None
    write(ws, {"a": "x\nhit\n", "a-1": "hit\n", "b:2": "hit hit\nhit\n", "c-3-": "no\n"})
    answers = []
    for null in (True, False):
        workspace = make_workspace(ws, tmp_path / f"null-{null}")
        engine = SearchEngine("grep", grep, "test", "path", pcre=False, null=null)
        workspace.ctx.engines["search"] = engine.health()
        out = await workspace.call(
            "file_search", {"pattern": "hit", "output_mode": mode, "context": 1}
        )
        answers.append(out.model_dump())
    assert answers[0] == answers[1]
    rows = answers[0][
        {"files_with_matches": "files", "content": "matches", "count": "counts"}[mode]
    ]
    if mode == "content":
        assert [(m["path"], m["line"], m["context_before"]) for m in rows] == [
            ("a", 2, ["x"]),
            ("a-1", 1, []),
            ("b:2", 1, []),
            ("b:2", 2, []),
        ]
    elif mode == "count":
        assert rows == [
            {"path": "a", "count": 1},
            {"path": "a-1", "count": 1},
            {"path": "b:2", "count": 2},
        ]
    else:
        assert rows == ["a", "a-1", "b:2"]
