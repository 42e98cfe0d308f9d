"""``git-diff`` inside a work tree, ``whitespace`` outside it or for untracked files."""

from __future__ import annotations

from pathlib import Path

from airlock.daemon.diagnostics.whitespace import check_whitespace
from airlock.daemon.protocol import Diagnostic, DiagnosticsInput, FilePatchInput, FileWriteInput
from airlock.daemon.workspace import Workspace
from tests.daemon.diagnostics.conftest import commit_all


def by_check(diagnostics: list[Diagnostic], check: str) -> list[Diagnostic]:
    return [d for d in diagnostics if d.check == check]


async def test_git_diff_catches_a_conflict_marker(untyped_workspace: Workspace, repo: Path) -> None:
    (repo / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    commit_all(repo)
    patched = await untyped_workspace.file_patch(
        FilePatchInput(
            path="notes.txt",
            old_string="beta\n",
            new_string="<<<<<<< HEAD\nbeta\n=======\nBETA\n>>>>>>> other\n",
        )
    )
    git = by_check(patched.diagnostics, "git-diff")
    assert {d.code for d in git} == {"conflict-marker"}
    assert {d.line for d in git} >= {2, 6}
    assert all(d.severity == "error" and d.path == "notes.txt" for d in git)
    assert by_check(patched.diagnostics, "whitespace") == []  # tracked: git judges it


async def test_git_diff_reports_only_new_whitespace(
    untyped_workspace: Workspace, repo: Path
) -> None:
    (repo / "a.py").write_text("x = 1\ny = 2\nz = 3\n")
    commit_all(repo)
    first = await untyped_workspace.file_patch(
        FilePatchInput(path="a.py", old_string="x = 1", new_string="x = 1   ")
    )
    assert [(d.line, d.code, d.column) for d in by_check(first.diagnostics, "git-diff")] == [
        (1, "trailing-whitespace", 6)
    ]
    # The work tree now has one uncommitted problem; a second edit adds another.
    second = await untyped_workspace.file_patch(
        FilePatchInput(path="a.py", old_string="z = 3", new_string="z = 3\t")
    )
    assert [(d.line, d.code) for d in by_check(second.diagnostics, "git-diff")] == [
        (3, "trailing-whitespace")
    ]
    report = await untyped_workspace.diagnostics(
        DiagnosticsInput(paths=["a.py"], checks=["git-diff"])
    )
    assert report.checks_run == ["git-diff"]
    assert sorted(d.line for d in report.diagnostics) == [1, 3]


async def test_committed_whitespace_is_not_reported(
    untyped_workspace: Workspace, repo: Path
) -> None:
    (repo / "b.txt").write_text("old   \nkeep\n")
    commit_all(repo)
    patched = await untyped_workspace.file_patch(
        FilePatchInput(path="b.txt", old_string="keep", new_string="kept")
    )
    assert patched.diagnostics == []


async def test_untracked_file_in_repo_uses_whitespace(
    untyped_workspace: Workspace, repo: Path
) -> None:
    commit_all_needs_a_file = repo / "README"
    commit_all_needs_a_file.write_text("r\n")
    commit_all(repo)
    wrote = await untyped_workspace.file_write(FileWriteInput(path="new.txt", content="a \nb\n"))
    assert [(d.check, d.line) for d in wrote.diagnostics] == [("whitespace", 1)]
    report = await untyped_workspace.diagnostics(
        DiagnosticsInput(paths=["new.txt"], checks=["git-diff", "whitespace"])
    )
    assert report.checks_run == ["whitespace"]
    assert [s.check for s in report.skipped] == ["git-diff"]


async def test_whitespace_outside_git_only_new(untyped_workspace: Workspace, ws_dir: Path) -> None:
    (ws_dir / "plain.txt").write_text("one  \ntwo\nthree\n")
    patched = await untyped_workspace.file_patch(
        FilePatchInput(path="plain.txt", old_string="three", new_string="three \n \tfour")
    )
    ws = by_check(patched.diagnostics, "whitespace")
    assert [(d.line, d.code) for d in ws] == [(3, "trailing-whitespace"), (4, "space-before-tab")]


async def test_moved_trailing_whitespace_is_not_new(
    untyped_workspace: Workspace, ws_dir: Path
) -> None:
    (ws_dir / "m.txt").write_text("head\nbad  \ntail\n")
    patched = await untyped_workspace.file_patch(
        FilePatchInput(path="m.txt", old_string="head\n", new_string="head\nmore\nlines\n")
    )
    assert patched.diagnostics == []


def test_whitespace_rules() -> None:
    text = "\n".join(
        [
            "def f():",
            "    a = 1",
            "    b = 2",
            "    c = 3",
            "\td = 4",  # tab in a space-indented file
            "x = 1 ",  # trailing
            "<<<<<<< ours",
            "=======",
            ">>>>>>> theirs",
            "",
        ]
    )
    found = {(f.diagnostic.line, f.diagnostic.code) for f in check_whitespace(text, "f.py")}
    assert found == {
        (5, "inconsistent-indentation"),
        (6, "trailing-whitespace"),
        (7, "conflict-marker"),
        (8, "conflict-marker"),
        (9, "conflict-marker"),
    }


def test_markdown_hard_breaks_and_lone_equals_are_fine() -> None:
    assert check_whitespace("line one  \nline two\n", "r.md", markdown=True) == []
    assert check_whitespace("Title\n=======\n", "r.rst") == []
    assert len(check_whitespace("line one  \n", "r.txt")) == 1
