"""apply_patch reports only what the patch introduced, across added and updated files."""

from __future__ import annotations

from pathlib import Path

from airlock.daemon.protocol import ApplyPatchInput
from airlock.daemon.workspace import Workspace


async def test_apply_patch_reports_new_problems_only(
    untyped_workspace: Workspace, ws_dir: Path
) -> None:
    (ws_dir / "old.py").write_text("def f(:\n    pass\n\n\nvalue = 1\n")  # already broken
    patch = "\n".join(
        [
            "*** Begin Patch",
            "*** Update File: old.py",
            "@@",
            "-value = 1",
            "+value = [1,",
            "*** Add File: new.json",
            '+{"a": 1,}',
            "*** Add File: notes.txt",
            "+tail   ",
            "*** End Patch",
        ]
    )
    result = await untyped_workspace.apply_patch(ApplyPatchInput(patch=patch))
    found = {(d.path, d.check, d.line) for d in result.diagnostics}
    assert ("new.json", "syntax", 1) in found
    assert ("notes.txt", "whitespace", 1) in found
    old_py = [d for d in result.diagnostics if d.path == "old.py"]
    assert old_py, result.diagnostics  # the unclosed "[" is new...
    assert all(d.line != 1 for d in old_py)  # ...the broken "def f(:" is not


async def test_apply_patch_without_diagnostics(untyped_workspace: Workspace) -> None:
    patch = "*** Begin Patch\n*** Add File: x.py\n+x = (\n*** End Patch\n"
    result = await untyped_workspace.apply_patch(ApplyPatchInput(patch=patch, diagnostics=False))
    assert result.diagnostics == []
    assert untyped_workspace.ctx.diag.worker.pid is None
