"""Codex's own apply_patch scenarios, run the way upstream runs them.

Each scenario directory: copy ``input/`` into a fresh workspace, apply
``patch.txt`` once (the outcome of the call is ignored, as upstream ignores
the exit status), then compare the whole tree, files and directories, byte
for byte with ``expected/``. The deliberate divergences (docs/apply-patch.md) are
asserted explicitly: 010 and 011 are refused with ``conflict`` and 015 leaves
nothing written.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from airlock.daemon.context import DaemonConfig
from airlock.daemon.errors import AirlockError
from airlock.daemon.workspace import Workspace
from tests.daemon.apply_patch.helpers import CONFORMANCE, snapshot

SCENARIOS = CONFORMANCE
# scenario -> (expected error code, the tree we leave instead of upstream's expected/)
DIVERGENCES: dict[str, tuple[str, str]] = {
    "010_move_overwrites_existing_destination": ("conflict", "input"),
    "011_add_overwrites_existing_file": ("conflict", "input"),
    "015_failure_after_partial_success_leaves_changes": ("not_found", "input"),
}


def _scenario_names() -> list[str]:
    if not SCENARIOS.is_dir():
        return []
    return sorted(p.name for p in SCENARIOS.iterdir() if p.is_dir())


def _workspace(tmp_path: Path) -> tuple[Workspace, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    return (
        Workspace(
            DaemonConfig(
                workspace=ws, artifacts_dir=tmp_path / "artifacts", state_dir=tmp_path / "state"
            )
        ),
        ws,
    )


def test_fixtures_present() -> None:
    assert SCENARIOS.is_dir(), f"vendored conformance fixtures missing: {SCENARIOS}"
    assert len(_scenario_names()) == 23


@pytest.mark.parametrize("name", _scenario_names() or ["<fixtures absent>"])
async def test_scenario(name: str, tmp_path: Path) -> None:
    if not SCENARIOS.is_dir():
        pytest.skip(f"conformance fixtures absent: {SCENARIOS} does not exist in this checkout")
    case = SCENARIOS / name
    workspace, ws = _workspace(tmp_path)
    if (case / "input").is_dir():
        # copyfile, not copy2: the shared fixtures are stored read-only (0444), and a
        # read-only file is one apply_patch refuses to edit (read_only).
        shutil.copytree(case / "input", ws, dirs_exist_ok=True, copy_function=shutil.copyfile)
    patch_text = (case / "patch.txt").read_bytes().decode("utf-8")
    error: AirlockError | None = None
    try:
        await workspace.call("apply_patch", {"patch": patch_text})
    except AirlockError as exc:
        error = exc
    if name in DIVERGENCES:
        code, tree = DIVERGENCES[name]
        assert error is not None and error.code == code, error
        assert "Nothing was written" in error.message
        assert snapshot(ws) == snapshot(case / tree)
        assert snapshot(ws) != snapshot(case / "expected")
        return
    assert snapshot(ws) == snapshot(case / "expected")
    # In the failing scenarios (005-009, 012, 013) expected/ is a copy of input/.
    if (case / "input").is_dir() and snapshot(case / "expected") == snapshot(case / "input"):
        assert error is not None, f"{name} should have been refused"
    else:
        assert error is None, error
