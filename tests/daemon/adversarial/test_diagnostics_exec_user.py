"""Write-scope diagnostics runs the workspace's programs only as the exec user.

Real user switch (the suite runs as root here; ``nobody`` is the exec user):
the planted interpreter and compiler record the uid they ran as. Read scope on
the same service runs neither; git runs nothing planted in either scope.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airlock.daemon.diagnostics.service import DiagnosticsService
from airlock.daemon.diagnostics.types import node_executable
from airlock.daemon.identity import ExecUser
from airlock.daemon.paths import ResolvedPath
from tests.daemon.adversarial.diag_plant import Markers, plant_git, plant_python, plant_typescript

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


def _paths(ws: Path, *names: str) -> list[ResolvedPath]:
    return [ResolvedPath(ws / n, ws, n) for n in names]


async def test_write_scope_runs_project_programs_as_the_exec_user(
    hostile_ws: Path, markers: Markers
) -> None:
    nobody = ExecUser.parse("nobody")
    plant_git(hostile_ws, markers)
    plant_python(hostile_ws, markers)
    plant_typescript(hostile_ws, markers)
    svc = DiagnosticsService(hostile_ws, timeout_s=60.0, exec_user=nobody)
    try:
        await svc.run(
            _paths(hostile_ws, "notes.txt", "mod.py", "app.ts"),
            ["git-diff", "types"],
            scope="read",
        )
        assert markers.ran() == {}, "read scope ran planted programs"
        out = await svc.run(
            _paths(hostile_ws, "notes.txt", "mod.py", "app.ts"),
            ["git-diff", "types"],
            scope="write",
        )
    finally:
        await svc.aclose()
    ran = markers.ran()
    if ran.get("venv-python") is None:
        # This machine's daemon interpreter lives under /root (0700): the exec user cannot
        # start basedpyright at all, which proves it was started as the exec user.
        reasons = " ".join(s.reason for s in out.skipped)
        assert "Permission denied" in reasons, (ran, reasons)
    else:
        assert ran["venv-python"] == nobody.uid, ran
    assert node_executable() is not None, "nodejs is a system package here"
    assert ran.get("ts") == nobody.uid, ran
    assert set(ran) <= {"venv-python", "ts"}, f"git ran a planted program: {ran}"
    assert all(uid != os.geteuid() for uid in ran.values())
    assert [d.code for d in out.diagnostics if d.check == "git-diff"] == ["trailing-whitespace"]


async def test_edit_baseline_runs_as_the_exec_user(hostile_ws: Path, markers: Markers) -> None:
    """The editing tools' tracker is write scope: the same rule holds for it."""
    nobody = ExecUser.parse("nobody")
    plant_typescript(hostile_ws, markers)
    svc = DiagnosticsService(hostile_ws, timeout_s=60.0, exec_user=nobody, edit_checks=["types"])
    try:
        tracker = svc.tracker(_paths(hostile_ws, "app.ts"))
        await tracker.start()
        await tracker.before_write()
        (hostile_ws / "app.ts").write_text("const n: number = 'y';\n")
        await tracker.finish()
    finally:
        await svc.aclose()
    assert markers.ran() == {"ts": nobody.uid}
