"""``types`` with the real checkers: basedpyright for Python, typescript@5 for TS/TSX."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.diagnostics.service import DiagnosticsService
from airlock.daemon.diagnostics.types import TYPESCRIPT_ENV, find_typescript, node_executable
from airlock.daemon.paths import ResolvedPath
from airlock.daemon.protocol import Diagnostic, DiagnosticsInput, FilePatchInput
from airlock.daemon.workspace import Workspace
from tests.fakes.wait import wait_until


def types_of(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diagnostics if d.check == "types"]


@pytest.mark.usefixtures("pyright_available")
async def test_python_type_error_is_new_once(workspace: Workspace, ws_dir: Path) -> None:
    (ws_dir / "calc.py").write_text(
        "def add(a: int, b: int) -> int:\n    return a + b\n\n\nTOTAL = add(1, 2)\n"
    )
    first = await workspace.file_patch(
        FilePatchInput(path="calc.py", old_string="add(1, 2)", new_string='add(1, "2")')
    )
    found = types_of(first.diagnostics)
    assert [(d.line, d.code, d.severity) for d in found] == [(5, "reportArgumentType", "error")]
    assert "\"Literal['2']\"" in found[0].message or "str" in found[0].message
    assert first.diagnostics_skipped == []
    # A second, unrelated edit keeps the old error: nothing new.
    second = await workspace.file_patch(
        FilePatchInput(path="calc.py", old_string="return a + b", new_string="return b + a")
    )
    assert types_of(second.diagnostics) == []
    report = await workspace.diagnostics(DiagnosticsInput(paths=["calc.py"], checks=["types"]))
    assert report.checks_run == ["types"]
    assert [d.line for d in report.diagnostics] == [5]


@pytest.mark.usefixtures("pyright_available")
async def test_python_project_config_is_honoured(workspace: Workspace, ws_dir: Path) -> None:
    """With a pyrightconfig.json, its rules decide (here: unused imports are errors)."""
    (ws_dir / "pyrightconfig.json").write_text(
        json.dumps({"typeCheckingMode": "standard", "reportUnusedImport": "error"})
    )
    (ws_dir / "mod.py").write_text("X = 1\n")
    patched = await workspace.file_patch(
        FilePatchInput(path="mod.py", old_string="X = 1", new_string="import os\nX = 1")
    )
    assert [(d.line, d.code) for d in types_of(patched.diagnostics)] == [(1, "reportUnusedImport")]


async def test_typescript_type_error_with_tsconfig(
    workspace: Workspace, ws_dir: Path, typescript_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TYPESCRIPT_ENV, str(typescript_dir))
    (ws_dir / "tsconfig.json").write_text(
        '{\n  // project settings\n  "compilerOptions": {"strict": true, "noEmit": true},\n'
        '  "include": ["src"]\n}\n'
    )
    (ws_dir / "src").mkdir()
    (ws_dir / "src" / "util.ts").write_text(
        "export function twice(n: number): number {\n  return n * 2;\n}\n"
    )
    (ws_dir / "src" / "main.ts").write_text(
        'import { twice } from "./util";\n\nexport const x: number = twice(2);\n'
    )
    patched = await workspace.file_patch(
        FilePatchInput(path="src/main.ts", old_string="twice(2)", new_string='twice("2")')
    )
    found = types_of(patched.diagnostics)
    assert [(d.path, d.line, d.code) for d in found] == [("src/main.ts", 3, "TS2345")]
    assert "not assignable" in found[0].message
    # Editing an already-broken file reports only the added error.
    again = await workspace.file_patch(
        FilePatchInput(
            path="src/main.ts",
            old_string="export const x",
            new_string="export const y: string = 1;\nexport const x",
        )
    )
    assert [(d.line, d.code) for d in types_of(again.diagnostics)] == [(3, "TS2322")]


async def test_typescript_without_config_and_tsx(
    workspace: Workspace, ws_dir: Path, typescript_dir: Path
) -> None:
    """The project's own node_modules/typescript is found; no tsconfig means defaults."""
    (ws_dir / "node_modules").symlink_to(typescript_dir.parent, target_is_directory=True)
    (ws_dir / "view.tsx").write_text(
        "export function View(props: { n: number }) {\n  return props.n;\n}\n"
    )
    patched = await workspace.file_patch(
        FilePatchInput(path="view.tsx", old_string="return props.n;", new_string="return props.m;")
    )
    assert [(d.line, d.code) for d in types_of(patched.diagnostics)] == [(2, "TS2339")]


async def test_missing_typescript_is_skipped_with_reason(
    ws_dir: Path, service: DiagnosticsService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TYPESCRIPT_ENV, raising=False)
    (ws_dir / "a.ts").write_text("const a: number = 'x';\n")
    if find_typescript(ws_dir / "a.ts", node_executable()) is not None:
        pytest.skip("a global typescript is installed on this machine")
    out = await service.run([ResolvedPath(ws_dir / "a.ts", ws_dir, "a.ts")], ["types"])
    assert out.diagnostics == []
    assert out.checks_run == []
    assert len(out.skipped) == 1
    assert "typescript is not installed" in out.skipped[0].reason
    assert "a.ts" in out.skipped[0].reason


@pytest.mark.usefixtures("pyright_available")
async def test_timeout_turns_into_skipped(ws_dir: Path) -> None:
    (ws_dir / "slow.py").write_text("x: int = 1\n")
    svc = DiagnosticsService(ws_dir, timeout_s=0.05)
    try:
        out = await svc.run([ResolvedPath(ws_dir / "slow.py", ws_dir, "slow.py")], ["types"])
        assert out.diagnostics == []
        assert [(s.check, s.reason.split(":")[0]) for s in out.skipped] == [("types", "timeout")]
        # The same through an edit: the edit still succeeds, the check is skipped.
        tracker = svc.tracker([ResolvedPath(ws_dir / "slow.py", ws_dir, "slow.py")])
        await tracker.start()
        await tracker.before_write()
        (ws_dir / "slow.py").write_text('x: int = "a"\n')
        found, skipped = await tracker.finish()
        assert [d for d in found if d.check == "types"] == []
        assert any(s.check == "types" and "timeout" in s.reason for s in skipped)
    finally:
        await svc.aclose()


@pytest.mark.usefixtures("pyright_available")
async def test_edits_skip_a_type_check_that_just_timed_out(ws_dir: Path) -> None:
    """A file too big to type-check in time must not make every edit wait out the timeout:
    after one timeout, edits skip the check (saying why); the tool itself still tries."""
    target = ResolvedPath(ws_dir / "slow.py", ws_dir, "slow.py")
    (ws_dir / "slow.py").write_text("x: int = 1\n")
    svc = DiagnosticsService(ws_dir, timeout_s=0.05, edit_checks=["types"])
    try:
        tracker = svc.tracker([target])
        await tracker.start()
        await tracker.before_write()
        (ws_dir / "slow.py").write_text("x: int = 2\n")
        await tracker.finish()
        runs = svc.type_checker_runs
        assert runs >= 1
        for value in (3, 4):
            tracker = svc.tracker([target])
            await tracker.start()
            await tracker.before_write()
            (ws_dir / "slow.py").write_text(f"x: int = {value}\n")
            _, skipped = await tracker.finish()
            reasons = [s.reason for s in skipped if s.check == "types"]
            assert reasons and all("not run for this edit" in r for r in reasons), reasons
        assert svc.type_checker_runs == runs  # no checker was started for these edits
        out = await svc.run([target], ["types"])
        assert svc.type_checker_runs == runs + 1  # asked directly, it runs again
        assert [s.reason.split(":")[0] for s in out.skipped] == ["timeout"]
    finally:
        await svc.aclose()


@pytest.mark.usefixtures("pyright_available")
async def test_consecutive_edits_reuse_the_previous_result(
    workspace: Workspace, ws_dir: Path
) -> None:
    """Edit N's result is edit N+1's baseline, unless the bytes changed in between."""
    (ws_dir / "r.py").write_text("A: int = 1\nB: int = 2\nC: int = 3\n")
    svc = workspace.ctx.diag
    first = await workspace.file_patch(
        FilePatchInput(path="r.py", old_string="A: int = 1", new_string='A: int = "1"')
    )
    assert [d.line for d in types_of(first.diagnostics)] == [1]
    runs = svc.type_checker_runs
    second = await workspace.file_patch(
        FilePatchInput(path="r.py", old_string="B: int = 2", new_string='B: int = "2"')
    )
    assert [d.line for d in types_of(second.diagnostics)] == [2]
    assert svc.type_checker_runs == runs + 1  # the baseline came from the first edit
    # Someone else changes the file (exec, an editor): the baseline is taken afresh.
    text = (ws_dir / "r.py").read_text()
    (ws_dir / "r.py").write_text(text + 'D: int = "4"\n')
    runs = svc.type_checker_runs
    third = await workspace.file_patch(
        FilePatchInput(path="r.py", old_string="C: int = 3", new_string='C: int = "3"')
    )
    assert [d.line for d in types_of(third.diagnostics)] == [3]
    assert svc.type_checker_runs == runs + 2


@pytest.mark.usefixtures("pyright_available")
async def test_failed_edit_abandons_its_baseline(workspace: Workspace, ws_dir: Path) -> None:
    """hunk_not_found before writing: the running baseline is cancelled, not left behind."""
    import gc

    from airlock.daemon.errors import AirlockError

    (ws_dir / "f.py").write_text("x = 1\n")
    before = {t for t in asyncio.all_tasks()}
    with pytest.raises(AirlockError):
        await workspace.file_patch(
            FilePatchInput(path="f.py", old_string="not there", new_string="y")
        )
    gc.collect()

    def collecting() -> list[asyncio.Task[Any]]:
        leftover = [t for t in asyncio.all_tasks() - before if not t.done()]
        return [t for t in leftover if "collect" in repr(t.get_coro())]

    with contextlib.suppress(AssertionError):
        await wait_until(lambda: not collecting(), timeout=5)
    leftover = [t for t in asyncio.all_tasks() - before if not t.done()]
    assert [t for t in leftover if "collect" in repr(t.get_coro())] == []


@pytest.mark.usefixtures("pyright_available")
async def test_language_server_sees_changes_made_behind_its_back(ws_dir: Path) -> None:
    """A dependency rewritten by someone else (exec, an editor) is re-read."""
    (ws_dir / "dep.py").write_text("def g() -> int:\n    return 1\n")
    (ws_dir / "main.py").write_text("from dep import g\n\nX: int = g()\n")
    svc = DiagnosticsService(ws_dir, timeout_s=60)
    svc.checkers.pyright.start_after = 0
    svc.checkers.pyright.wait_for_start = True
    main = [ResolvedPath(ws_dir / "main.py", ws_dir, "main.py")]
    try:
        clean = await svc.run(main, ["types"], scope="write")
        assert clean.diagnostics == [] and clean.checks_run == ["types"]
        assert svc.checkers.pyright.ready_roots() == [ws_dir]
        (ws_dir / "dep.py").write_text('def g() -> str:\n    return "1"\n')
        broken = await svc.run(main, ["types"], scope="write")
        assert [(d.line, d.code) for d in broken.diagnostics] == [(3, "reportAssignmentType")]
    finally:
        await svc.aclose()


@pytest.mark.usefixtures("pyright_available")
async def test_cli_and_language_server_agree(ws_dir: Path) -> None:
    """Baseline and result may come from either; their keys must be identical."""
    (ws_dir / "t.py").write_text(
        'from typing import TypedDict\n\n\nclass P(TypedDict):\n    n: int\n\n\nv: P = {"n": "x"}\n'
        "w: list[int] = [1, None]\n"
    )
    target = [ResolvedPath(ws_dir / "t.py", ws_dir, "t.py")]
    server = DiagnosticsService(ws_dir, timeout_s=60)
    server.checkers.pyright.start_after = 0
    server.checkers.pyright.wait_for_start = True
    cli = DiagnosticsService(ws_dir, timeout_s=60)
    cli.checkers.pyright_server = False
    try:
        via_server = await server.run(target, ["types"], scope="write")
        assert server.checkers.pyright.ready_roots() == [ws_dir]
        via_cli = await cli.run(target, ["types"])
        assert cli.checkers.pyright.ready_roots() == []
    finally:
        await server.aclose()
        await cli.aclose()
    assert len(via_server.diagnostics) >= 2
    assert via_server.diagnostics == via_cli.diagnostics


@pytest.mark.usefixtures("pyright_available")
async def test_server_starts_in_the_background_for_files_being_edited(
    workspace: Workspace, ws_dir: Path
) -> None:
    """One-off checks use the CLI; a file edited repeatedly gets a warm server."""
    (ws_dir / "e.py").write_text("A: int = 1\nB: int = 2\nC: int = 3\n")
    pyright = workspace.ctx.diag.checkers.pyright
    await workspace.file_patch(
        FilePatchInput(path="e.py", old_string="A: int = 1", new_string="A: int = 10")
    )
    assert pyright.ready_roots() == []  # two checks (baseline, result): CLI only
    await workspace.file_patch(
        FilePatchInput(path="e.py", old_string="B: int = 2", new_string="B: int = 20")
    )
    # The third check started one in the background.
    with contextlib.suppress(AssertionError):
        await wait_until(pyright.ready_roots, timeout=90)
    assert pyright.ready_roots() == [ws_dir]
    third = await workspace.file_patch(
        FilePatchInput(path="e.py", old_string="C: int = 3", new_string='C: int = "3"')
    )
    assert [(d.line, d.code) for d in types_of(third.diagnostics)] == [(3, "reportAssignmentType")]


async def test_javascript_is_typed_only_under_a_config(
    workspace: Workspace, ws_dir: Path, typescript_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TYPESCRIPT_ENV, str(typescript_dir))
    (ws_dir / "loose.js").write_text("let n = 1;\n")
    loose = await workspace.file_patch(
        FilePatchInput(path="loose.js", old_string="let n = 1;", new_string="let n = 1;\nn.foo();")
    )
    assert types_of(loose.diagnostics) == []
    assert loose.diagnostics_skipped == []  # not applicable is not a skip
    (ws_dir / "app").mkdir()
    (ws_dir / "app" / "jsconfig.json").write_text('{"compilerOptions": {"checkJs": true}}\n')
    (ws_dir / "app" / "typed.js").write_text("let n = 1;\n")
    typed = await workspace.file_patch(
        FilePatchInput(
            path="app/typed.js", old_string="let n = 1;", new_string="let n = 1;\nn.foo();"
        )
    )
    assert [(d.line, d.code) for d in types_of(typed.diagnostics)] == [(2, "TS2339")]


def test_describe_names_the_checkers(ws_dir: Path) -> None:
    described = DiagnosticsService(ws_dir, timeout_s=7).describe()
    assert described["syntax"] == "tree-sitter"
    assert described["timeout_s"] == 7
    assert set(described) == {"syntax", "python_types", "node", "typescript", "timeout_s"}
