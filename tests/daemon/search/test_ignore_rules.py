"""The .gitignore matcher (used by file_list and the grep fallback) agrees with git itself."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from airlock.daemon.search.globs import compile_glob
from airlock.daemon.search.ignore import stack_for
from airlock.daemon.search.query import GlobFilter
from airlock.daemon.search.walk import walk
from tests.daemon.search.support import write

GITIGNORE = """\
# comment
*.log
!important.log
/root-only.txt
build/
docs/**/*.tmp
**/cache
a/**/z
lit\\#hash
[abc]x.dat
?.one
nested/*.md
"""
# An escaped trailing space is part of the pattern (kept out of the literal for linters).
GITIGNORE += "trailing-space\\ \n"

FILES = [
    "app.log",
    "important.log",
    "sub/deep.log",
    "root-only.txt",
    "sub/root-only.txt",
    "build/x.o",
    "src/build/y.o",
    "docs/a/b/c.tmp",
    "docs/c.tmp",
    "other/c.tmp",
    "x/cache/data",
    "cache/data",
    "a/z",
    "a/q/r/z",
    "#hash",
    "lit#hash",
    "trailing-space ",
    "ax.dat",
    "dx.dat",
    "1.one",
    "12.one",
    "nested/readme.md",
    "nested/deeper/readme.md",
    "keep/me.txt",
    "sub/nested/notes.md",
]


def git_ignored(root: Path, rels: list[str]) -> set[str]:
    proc = subprocess.run(
        ["git", "-C", str(root), "check-ignore", "--no-index", "--stdin", "-z"],
        input="\0".join(rels).encode() + b"\0",
        capture_output=True,
        check=False,
    )
    return {p for p in proc.stdout.decode().split("\0") if p}


def walked_files(root: Path) -> set[str]:
    return {
        e.rel
        for e in walk(root, "", max_depth=None, include_hidden=True, ignore=stack_for(root, ""))
        if e.kind == "file"
    }


def test_matcher_agrees_with_git_check_ignore(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    write(root, {".gitignore": GITIGNORE, **{f: "x\n" for f in FILES}})
    write(root, {"sub/.gitignore": "!deep.log\n"})
    ignored_by_git = git_ignored(root, FILES)
    # A file inside an ignored directory is ignored even when git reports only the directory.
    visible = walked_files(root)
    expected_visible = {f for f in FILES if f not in ignored_by_git} | {
        ".gitignore",
        "sub/.gitignore",
    }
    assert visible == expected_visible
    assert "important.log" in visible and "app.log" not in visible
    assert "sub/deep.log" in visible  # re-included by the deeper .gitignore


def test_outside_git_the_same_rules_apply(tmp_path: Path) -> None:
    write(
        tmp_path / "plain",
        {".gitignore": "*.log\nbuild/\n", "a.log": "", "b.txt": "", "build/c": ""},
    )
    assert walked_files(tmp_path / "plain") == {".gitignore", "b.txt"}


@pytest.mark.parametrize(
    ("glob", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", "a/b.py", False),
        ("**/*.py", "a/b/c.py", True),
        ("**/*.py", "c.py", True),
        ("src/**", "src/a/b", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("*.{ts,tsx}", "a.tsx", True),
        ("*.{ts,tsx}", "a.js", False),
        ("[!a]b", "cb", True),
        ("[!a]b", "ab", False),
        ("?", "/", False),
    ],
)
def test_glob_translation(glob: str, path: str, matches: bool) -> None:
    assert bool(compile_glob(glob, braces=True).match(path)) is matches


def test_user_glob_filter_semantics() -> None:
    py = GlobFilter.parse("*.py")
    assert py.keep_file("deep/down/x.py") and not py.keep_file("x.pyc")
    assert not py.prune_dir("src")
    no_tests = GlobFilter.parse("!tests")
    assert no_tests.prune_dir("a/tests") and no_tests.keep_file("a/x.py")
    anchored = GlobFilter.parse("src/*.py")
    assert anchored.keep_file("src/a.py") and not anchored.keep_file("lib/src/a.py")
