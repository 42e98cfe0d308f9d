"""A directory swapped for a symlink *between* two writes of one patch.

The first write has landed inside; the second is refused by the confinement
layer; the first cannot be rolled back through the swapped directory either
(that would follow the link). The answer is the caller's race, ``conflict``,
saying exactly what landed and was not undone; nothing outside is touched.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.apply_patch import committer
from airlock.daemon.errors import AirlockError
from airlock.daemon.fsio import apply_one
from tests.daemon.apply_patch.conftest import Apply
from tests.daemon.apply_patch.helpers import patch


async def test_swap_between_two_writes_is_a_conflict_not_internal(
    apply: Apply, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "sub").mkdir()
    (ws / "sub" / "a.txt").write_text("a\n")
    (ws / "sub" / "b.txt").write_text("b\n")
    real_apply_one = apply_one
    calls = 0

    def apply_then_swap(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        result = real_apply_one(*args, **kwargs)
        calls += 1
        if calls == 1:  # the hostile process wins the race right after the first write
            os.rename(ws / "sub", ws / "moved")
            os.symlink(outside, ws / "sub")
        return result

    monkeypatch.setattr(committer, "apply_one", apply_then_swap)
    with pytest.raises(AirlockError) as info:
        await apply(
            patch(
                "*** Update File: sub/a.txt",
                "@@",
                "-a",
                "+A",
                "*** Update File: sub/b.txt",
                "@@",
                "-b",
                "+B",
            ),
            diagnostics=False,
        )
    err = info.value
    assert err.code == "conflict", err.message
    assert err.details["failed"] == "sub/b.txt"
    assert err.details["not_rolled_back"] == ["sub/a.txt"]
    assert "nothing was rolled back" in err.message and "try again" in err.message
    assert list(outside.iterdir()) == []  # neither the write nor the rollback went outside
    assert (ws / "moved" / "a.txt").read_text() == "A\n"  # landed before the swap
    assert (ws / "moved" / "b.txt").read_text() == "b\n"
