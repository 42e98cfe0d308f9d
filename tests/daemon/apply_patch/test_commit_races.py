"""A directory swapped for a symlink *between* two writes of one patch.

Every target's directory is opened through the resolver while the new
contents are staged, before the first rename, and every rename goes through
those descriptors. A swap after the first rename therefore cannot send the
second one anywhere: it lands in the same (now moved) directory, inside the
workspace, and nothing outside is touched. A swap while staging is refused
by the confinement layer before anything was replaced.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.commit import committer, staging
from airlock.daemon.errors import AirlockError
from tests.daemon.apply_patch.conftest import Apply
from tests.daemon.apply_patch.helpers import patch


def _two_files(ws: Path, tmp_path: Path) -> Path:
    """``sub/a.txt`` and ``sub/b.txt`` in the workspace; the empty folder outside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "sub").mkdir()
    (ws / "sub" / "a.txt").write_text("a\n")
    (ws / "sub" / "b.txt").write_text("b\n")
    return outside


def _swap_after_first(
    monkeypatch: pytest.MonkeyPatch, name: str, real: Callable[..., Any], ws: Path, outside: Path
) -> None:
    """The committer's ``name`` step, with ``sub`` swapped for a link out right after its
    first call returns: the hostile process winning the race at that point."""
    calls = 0

    def then_swap(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        result = real(*args, **kwargs)
        calls += 1
        if calls == 1:
            os.rename(ws / "sub", ws / "moved")
            os.symlink(outside, ws / "sub")
        return result

    monkeypatch.setattr(committer, name, then_swap)


async def test_swap_between_two_renames_cannot_redirect_the_second(
    apply: Apply, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = _two_files(ws, tmp_path)
    # the swap lands right after the first rename
    _swap_after_first(monkeypatch, "install", staging.install, ws, outside)
    await apply(_two_updates(), diagnostics=False)
    assert list(outside.iterdir()) == []  # nothing went through the link
    assert (ws / "moved" / "a.txt").read_text() == "A\n"
    assert (ws / "moved" / "b.txt").read_text() == "B\n"
    assert sorted(p.name for p in (ws / "moved").iterdir()) == ["a.txt", "b.txt"]


async def test_swap_while_staging_writes_nothing(
    apply: Apply, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = _two_files(ws, tmp_path)
    # the swap lands between staging the first and the second file
    _swap_after_first(monkeypatch, "stage", staging.stage, ws, outside)
    with pytest.raises(AirlockError) as info:
        await apply(_two_updates(), diagnostics=False)
    assert info.value.code == "path_escape", info.value.message
    assert list(outside.iterdir()) == []
    assert (ws / "moved" / "a.txt").read_text() == "a\n"  # staged, never installed
    assert (ws / "moved" / "b.txt").read_text() == "b\n"
    assert sorted(p.name for p in (ws / "moved").iterdir()) == ["a.txt", "b.txt"]


def _two_updates() -> str:
    return patch(
        "*** Update File: sub/a.txt",
        "@@",
        "-a",
        "+A",
        "*** Update File: sub/b.txt",
        "@@",
        "-b",
        "+B",
    )
