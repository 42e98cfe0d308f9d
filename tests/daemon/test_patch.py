"""file_patch, file_multi_patch and file_diff_preview: tiers, uniqueness, all-or-nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.daemon.errors import AirlockError
from tests.daemon.conftest import ToolCall

PY = "def f(x):\n    if x:\n        return 1\n    return 2\n"


async def test_exact(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "m.py").write_text(PY)
    out = await tool_call(
        "file_patch", {"path": "m.py", "old_string": "return 1", "new_string": "return 10"}
    )
    assert out["match"] == "exact" and out["replacements"] == 1
    assert "-        return 1\n+        return 10\n" in out["diff"]
    assert (workspace_dir / "m.py").read_text() == PY.replace("return 1", "return 10")


async def test_trailing_whitespace_tier(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "t.txt").write_text("alpha   \nbeta\t\ngamma\n")
    out = await tool_call(
        "file_patch",
        {"path": "t.txt", "old_string": "alpha\nbeta\n", "new_string": "ALPHA\nBETA\n"},
    )
    assert out["match"] == "trailing_whitespace"
    assert (workspace_dir / "t.txt").read_text() == "ALPHA\nBETA\ngamma\n"


async def test_indentation_tier_rebases_new_string(
    tool_call: ToolCall, workspace_dir: Path
) -> None:
    (workspace_dir / "m.py").write_text(PY)
    out = await tool_call(
        "file_patch",
        {
            "path": "m.py",
            "old_string": "if x:\n    return 1\n",
            "new_string": "if x:\n    log(x)\n    return 1\n",
        },
    )
    assert out["match"] == "indentation"
    assert (workspace_dir / "m.py").read_text() == (
        "def f(x):\n    if x:\n        log(x)\n        return 1\n    return 2\n"
    )


async def test_indentation_without_single_offset_is_refused(
    tool_call: ToolCall, workspace_dir: Path
) -> None:
    (workspace_dir / "m.py").write_text("a:\n  b\n      c\n")
    with pytest.raises(AirlockError) as info:
        await tool_call(
            "file_patch", {"path": "m.py", "old_string": "a:\n    b\n    c\n", "new_string": "z\n"}
        )
    assert info.value.code == "hunk_not_found"
    assert (workspace_dir / "m.py").read_text() == "a:\n  b\n      c\n"


async def test_ambiguous_names_lines_and_replace_all(
    tool_call: ToolCall, workspace_dir: Path
) -> None:
    (workspace_dir / "d.txt").write_text("x = 1\ny\nx = 1\n")
    with pytest.raises(AirlockError) as info:
        await tool_call(
            "file_patch", {"path": "d.txt", "old_string": "x = 1", "new_string": "x = 2"}
        )
    assert info.value.code == "ambiguous_match"
    assert info.value.details["lines"] == [1, 3]
    assert "1, 3" in info.value.message
    out = await tool_call(
        "file_patch",
        {"path": "d.txt", "old_string": "x = 1", "new_string": "x = 2", "replace_all": True},
    )
    assert out["replacements"] == 2
    assert (workspace_dir / "d.txt").read_text() == "x = 2\ny\nx = 2\n"


async def test_not_found_shows_closest_lines(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "m.py").write_text(PY)
    with pytest.raises(AirlockError) as info:
        await tool_call(
            "file_patch", {"path": "m.py", "old_string": "if y:\n    return 1", "new_string": "z"}
        )
    assert info.value.code == "hunk_not_found"
    assert "3 |         return 1" in info.value.message
    assert "Re-read" in info.value.message


@pytest.mark.parametrize(
    ("old", "new"), [("", "x"), ("same", "same")], ids=["empty-old", "identical"]
)
async def test_invalid_edits(tool_call: ToolCall, workspace_dir: Path, old: str, new: str) -> None:
    (workspace_dir / "f.txt").write_text("same\n")
    with pytest.raises(AirlockError) as info:
        await tool_call("file_patch", {"path": "f.txt", "old_string": old, "new_string": new})
    assert info.value.code == "invalid_request"


async def test_only_existing_files(tool_call: ToolCall) -> None:
    with pytest.raises(AirlockError) as info:
        await tool_call("file_patch", {"path": "new.txt", "old_string": "a", "new_string": "b"})
    assert info.value.code == "not_found"


async def test_expected_sha256(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "f.txt").write_text("a\n")
    with pytest.raises(AirlockError) as info:
        await tool_call(
            "file_patch",
            {"path": "f.txt", "old_string": "a", "new_string": "b", "expected_sha256": "0" * 64},
        )
    assert info.value.code == "stale_write"
    assert (workspace_dir / "f.txt").read_text() == "a\n"


async def test_multi_patch_all_or_nothing(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "a.txt").write_text("one\ntwo\n")
    (workspace_dir / "b.txt").write_text("three\n")
    edits = [
        {"path": "a.txt", "old_string": "one", "new_string": "1"},
        {"path": "a.txt", "old_string": "1\ntwo", "new_string": "1\n2"},
        {"path": "b.txt", "old_string": "missing", "new_string": "x"},
    ]
    with pytest.raises(AirlockError) as info:
        await tool_call("file_multi_patch", {"edits": edits})
    assert info.value.code == "hunk_not_found"
    assert info.value.details["index"] == 2 and info.value.details["path"] == "b.txt"
    assert "edit 2 (b.txt)" in info.value.message
    assert (workspace_dir / "a.txt").read_text() == "one\ntwo\n"
    edits[2] = {"path": "b.txt", "old_string": "three", "new_string": "3"}
    out = await tool_call("file_multi_patch", {"edits": edits})
    assert [f["path"] for f in out["files"]] == ["a.txt", "b.txt"]
    assert out["files"][0]["replacements"] == 2
    assert (workspace_dir / "a.txt").read_text() == "1\n2\n"
    assert (workspace_dir / "b.txt").read_text() == "3\n"


async def test_diff_preview_writes_nothing_and_matches_multi_patch(
    tool_call: ToolCall, workspace_dir: Path
) -> None:
    (workspace_dir / "a.txt").write_text("one\ntwo\n")
    edits = [{"path": "a.txt", "old_string": "two", "new_string": "TWO"}]
    preview = await tool_call("file_diff_preview", {"edits": edits})
    assert (workspace_dir / "a.txt").read_text() == "one\ntwo\n"
    applied = await tool_call("file_multi_patch", {"edits": edits})
    assert preview["files"][0]["diff"] == applied["files"][0]["diff"]
    assert "+TWO" in preview["files"][0]["diff"]


async def test_multi_patch_refuses_generated_and_escaping_edits(
    tool_call: ToolCall, workspace_dir: Path
) -> None:
    (workspace_dir / "a.txt").write_text("a\n")
    edits = [
        {"path": "a.txt", "old_string": "a", "new_string": "b"},
        {"path": "../x.txt", "old_string": "a", "new_string": "b"},
    ]
    with pytest.raises(AirlockError) as info:
        await tool_call("file_multi_patch", {"edits": edits})
    assert info.value.code == "path_escape" and info.value.details["index"] == 1
    assert (workspace_dir / "a.txt").read_text() == "a\n"
