"""Syntax diagnostics for every language, through the editing tools.

For each language: a clean file gives nothing, a broken edit reports the new
error with its line, and an edit to an already-broken file reports only the
error it added.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.daemon.protocol import (
    Diagnostic,
    DiagnosticsInput,
    FileMultiPatchInput,
    FilePatchInput,
    FileWriteInput,
    PatchEdit,
)
from airlock.daemon.workspace import Workspace
from tests.daemon.diagnostics.cases import CASES, LanguageCase

BY_ID = pytest.mark.parametrize("case", CASES, ids=[c.language for c in CASES])


def syntax_lines(diagnostics: list[Diagnostic]) -> set[int]:
    return {d.line for d in diagnostics if d.check == "syntax"}


@BY_ID
async def test_clean_file_gives_nothing(untyped_workspace: Workspace, case: LanguageCase) -> None:
    wrote = await untyped_workspace.file_write(
        FileWriteInput(path=case.filename, content=case.clean)
    )
    assert [d for d in wrote.diagnostics if d.check == "syntax"] == []
    report = await untyped_workspace.diagnostics(
        DiagnosticsInput(paths=[case.filename], checks=["syntax"])
    )
    assert report.diagnostics == []
    assert report.checks_run == ["syntax"]
    assert report.skipped == []


@BY_ID
async def test_broken_edit_reports_the_new_error(
    untyped_workspace: Workspace, case: LanguageCase
) -> None:
    await untyped_workspace.file_write(FileWriteInput(path=case.filename, content=case.clean))
    old, new = case.first
    patched = await untyped_workspace.file_patch(
        FilePatchInput(path=case.filename, old_string=old, new_string=new)
    )
    assert syntax_lines(patched.diagnostics) == {case.first_line}
    for d in (d for d in patched.diagnostics if d.check == "syntax"):
        assert d.path == case.filename
        assert d.severity == "error"
        assert d.column >= 1
        assert d.message


@BY_ID
async def test_edit_to_broken_file_reports_only_what_it_added(
    untyped_workspace: Workspace, case: LanguageCase
) -> None:
    broken = case.clean.replace(*case.first)
    wrote = await untyped_workspace.file_write(FileWriteInput(path=case.filename, content=broken))
    assert syntax_lines(wrote.diagnostics) == {case.first_line}  # a new file: all is new
    old, new = case.second
    patched = await untyped_workspace.file_patch(
        FilePatchInput(path=case.filename, old_string=old, new_string=new)
    )
    assert syntax_lines(patched.diagnostics) == {case.second_line}
    # The diagnostics tool still sees both.
    report = await untyped_workspace.diagnostics(
        DiagnosticsInput(paths=[case.filename], checks=["syntax"])
    )
    assert {case.first_line, case.second_line} <= {d.line for d in report.diagnostics}


async def test_fixing_an_error_reports_nothing(untyped_workspace: Workspace) -> None:
    case = CASES[0]
    await untyped_workspace.file_write(
        FileWriteInput(path=case.filename, content=case.clean.replace(*case.first))
    )
    fixed = await untyped_workspace.file_patch(
        FilePatchInput(path=case.filename, old_string=case.first[1], new_string=case.first[0])
    )
    assert fixed.diagnostics == []


async def test_moving_broken_code_is_not_new(untyped_workspace: Workspace) -> None:
    """Line numbers are ignored: shifting an existing error down reports nothing."""
    text = "import os\n\n\ndef f(:\n    pass\n"
    await untyped_workspace.file_write(FileWriteInput(path="m.py", content=text, diagnostics=False))
    patched = await untyped_workspace.file_patch(
        FilePatchInput(path="m.py", old_string="import os\n", new_string="import os\nimport re\n")
    )
    assert [d for d in patched.diagnostics if d.check == "syntax"] == []


async def test_python_message_is_precise(workspace: Workspace) -> None:
    await workspace.file_write(FileWriteInput(path="p.py", content="x = 1\ny = 2\n"))
    patched = await workspace.file_patch(
        FilePatchInput(path="p.py", old_string="y = 2", new_string="y = (2,\n    3\n")
    )
    syntax = [d for d in patched.diagnostics if d.check == "syntax"]
    assert syntax, patched.diagnostics
    assert syntax[0].code == "python-syntax"
    assert "never closed" in syntax[0].message
    assert syntax[0].line == 2
    # basedpyright's own parse errors would repeat it under "types": they are dropped.
    assert [d for d in patched.diagnostics if d.check == "types"] == []


async def test_multi_patch_reports_each_file(untyped_workspace: Workspace) -> None:
    await untyped_workspace.file_write(FileWriteInput(path="a.js", content="let a = 1;\n"))
    await untyped_workspace.file_write(
        FileWriteInput(path="b.go", content="package b\n\nvar B = 1\n")
    )
    result = await untyped_workspace.file_multi_patch(
        FileMultiPatchInput(
            edits=[
                PatchEdit(path="a.js", old_string="let a = 1;", new_string="let a = ;"),
                PatchEdit(path="b.go", old_string="var B = 1", new_string="var B = )"),
            ]
        )
    )
    assert {(d.path, d.line) for d in result.diagnostics if d.check == "syntax"} == {
        ("a.js", 1),
        ("b.go", 3),
    }


async def test_diagnostics_false_costs_nothing(untyped_workspace: Workspace) -> None:
    await untyped_workspace.file_write(
        FileWriteInput(path="q.py", content="x = 1\n", diagnostics=False)
    )
    patched = await untyped_workspace.file_patch(
        FilePatchInput(path="q.py", old_string="x = 1", new_string="x = (", diagnostics=False)
    )
    assert patched.diagnostics == []
    assert patched.diagnostics_skipped == []
    assert untyped_workspace.ctx.diag.worker.pid is None  # no worker was ever started


async def test_jsonc_and_yaml_tags_are_not_errors(untyped_workspace: Workspace) -> None:
    tsconfig = '{\n  // comment\n  "compilerOptions": {"strict": true,},\n}\n'
    template = "Resources:\n  Bucket:\n    Name: !Ref BucketName\n    List: !Split [',', x]\n"
    for path, content in (("tsconfig.json", tsconfig), ("cfn.yaml", template)):
        wrote = await untyped_workspace.file_write(FileWriteInput(path=path, content=content))
        assert [d for d in wrote.diagnostics if d.check == "syntax"] == [], path


async def test_yaml_and_toml_messages_come_from_exact_parsers(untyped_workspace: Workspace) -> None:
    yaml = await untyped_workspace.file_write(
        FileWriteInput(path="c.yml", content="a: 1\nb: [1, 2\nc: 3\n")
    )
    toml = await untyped_workspace.file_write(
        FileWriteInput(path="c.toml", content="[t]\nx = 1\nx = 2\n")
    )
    assert [d.code for d in yaml.diagnostics if d.check == "syntax"][:1] == ["yaml-syntax"]
    toml_syntax = [d for d in toml.diagnostics if d.check == "syntax"]
    assert [d.code for d in toml_syntax] == ["toml-syntax"]
    assert toml_syntax[0].line == 3  # tomllib: a duplicate key, which tree-sitter accepts


async def test_no_grammar_is_not_applicable(untyped_workspace: Workspace, ws_dir: Path) -> None:
    (ws_dir / "notes.md").write_text("# hi\n")
    report = await untyped_workspace.diagnostics(
        DiagnosticsInput(paths=["notes.md"], checks=["syntax"])
    )
    assert report.checks_run == []
    assert [s.check for s in report.skipped] == ["syntax"]
    assert "not applicable" in report.skipped[0].reason
    patched = await untyped_workspace.file_patch(
        FilePatchInput(path="notes.md", old_string="# hi", new_string="# hello")
    )
    assert patched.diagnostics_skipped == []  # editing tools do not list inapplicable checks


async def test_binary_and_shebang_files(untyped_workspace: Workspace, ws_dir: Path) -> None:
    (ws_dir / "blob.py").write_bytes(b"\x00\x01\x02")
    (ws_dir / "script").write_text("#!/usr/bin/env bash\nif true; then\n  echo hi\n")
    report = await untyped_workspace.diagnostics(
        DiagnosticsInput(paths=["blob.py", "script"], checks=["syntax"])
    )
    assert [(d.path, d.code) for d in report.diagnostics] == [("script", "missing")]


async def test_a_directory_means_its_files(untyped_workspace: Workspace, ws_dir: Path) -> None:
    (ws_dir / "src" / "deep").mkdir(parents=True)
    (ws_dir / "src" / "a.py").write_text("x = (\n")
    (ws_dir / "src" / "deep" / "b.json").write_text('{"a": }\n')
    (ws_dir / "src" / "ok.go").write_text("package ok\n")
    for skipped in ("node_modules", ".hidden", "__pycache__"):
        (ws_dir / skipped).mkdir()
        (ws_dir / skipped / "c.py").write_text("y = (\n")
    for ask, shown in (
        (".", ["src/a.py", "src/deep/b.json"]),
        ("src", ["src/a.py", "src/deep/b.json"]),
    ):
        report = await untyped_workspace.diagnostics(
            DiagnosticsInput(paths=[ask], checks=["syntax"])
        )
        assert sorted(d.path for d in report.diagnostics) == shown, ask
        assert report.checks_run == ["syntax"]
