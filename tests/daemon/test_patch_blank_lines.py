"""file_patch's last tier: stray blank lines at the edges of old_string are ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.daemon.errors import AmbiguousMatch, HunkNotFound
from airlock.daemon.matching import trim_blank_edges
from tests.daemon.conftest import ToolCall

SRC = "import os\ndef f():\n    return 1\ndef g():\n    return 2\n"


@pytest.mark.parametrize(
    "old, new",
    [
        ("\n\ndef f():\n    return 1\n", "\n\ndef f():\n    return 10\n"),
        ("def f():\n    return 1\n\n", "def f():\n    return 10\n\n"),
        ("\n\ndef f():\n    return 1\n  \n", "def f():\n    return 10\n"),
        ("   \n  def f():\n      return 1\n", "  def f():\n      return 10\n"),
    ],
)
async def test_blank_edges_are_ignored(
    tool_call: ToolCall, workspace_dir: Path, old: str, new: str
) -> None:
    (workspace_dir / "m.py").write_text(SRC)
    out = await tool_call("file_patch", {"path": "m.py", "old_string": old, "new_string": new})
    assert out["match"] == "blank_lines" and out["replacements"] == 1
    assert (workspace_dir / "m.py").read_text() == SRC.replace("return 1\n", "return 10\n")


async def test_earlier_tiers_win(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "m.py").write_text("a\n\nb\n")
    out = await tool_call("file_patch", {"path": "m.py", "old_string": "\nb", "new_string": "\nB"})
    assert out["match"] == "exact"
    assert (workspace_dir / "m.py").read_text() == "a\n\nB\n"


async def test_uniqueness_is_still_required(tool_call: ToolCall, workspace_dir: Path) -> None:
    text = "x = 1\ny = 2\nx = 1\n"
    (workspace_dir / "m.py").write_text(text)
    with pytest.raises(AmbiguousMatch):
        await tool_call(
            "file_patch", {"path": "m.py", "old_string": "\n\nx = 1\n", "new_string": "x = 3\n"}
        )
    assert (workspace_dir / "m.py").read_text() == text
    with pytest.raises(HunkNotFound):
        await tool_call(
            "file_patch", {"path": "m.py", "old_string": "\n\nz = 1\n", "new_string": "x"}
        )
    assert (workspace_dir / "m.py").read_text() == text


def test_trim_blank_edges() -> None:
    assert trim_blank_edges("a\n", "b\n") is None
    assert trim_blank_edges("\n\n", "x") is None
    assert trim_blank_edges("\na\n\n", "\nb\n\n") == ("a\n", "b\n")
    assert trim_blank_edges("\na", "b") == ("a", "b")
    assert trim_blank_edges("a\n\n", "b\n\nc\n") == ("a\n", "b\n\nc\n")


@pytest.mark.parametrize(
    "old, new, expected",
    [
        # The case: the trailing blank line of old_string must not take the
        # line ending of "gamma" with it (today: "alpha\nBETA\nGAMMAdelta\n").
        ("\nbeta\ngamma\n\n", "BETA\nGAMMA", "alpha\nBETA\nGAMMA\ndelta\n"),
        ("\nbeta\ngamma\n\n", "BETA\nGAMMA\n", "alpha\nBETA\nGAMMA\ndelta\n"),
        # A blank last line that is not terminated is still a whole line.
        ("beta\ngamma\n  ", "BETA\nGAMMA", "alpha\nBETA\nGAMMA\ndelta\n"),
        # Leading blank lines only: new_string's own ending is kept as sent.
        ("\n\nbeta\ngamma\n", "BETA\nGAMMA\n", "alpha\nBETA\nGAMMA\ndelta\n"),
        # Deleting the lines leaves no half line behind.
        ("\nbeta\ngamma\n\n", "", "alpha\ndelta\n"),
        ("\nbeta\ngamma\n\n", "\n\n", "alpha\ndelta\n"),
    ],
)
async def test_blank_lines_tier_never_joins_or_splits_lines(
    tool_call: ToolCall, workspace_dir: Path, old: str, new: str, expected: str
) -> None:
    (workspace_dir / "f.txt").write_text("alpha\nbeta\ngamma\ndelta\n")
    out = await tool_call("file_patch", {"path": "f.txt", "old_string": old, "new_string": new})
    assert out["match"] == "blank_lines"
    assert (workspace_dir / "f.txt").read_text() == expected
    # The same number of lines as the edit meant: every line of the file still ends in \n.
    assert (workspace_dir / "f.txt").read_bytes().count(b"\n") == expected.count("\n")


async def test_blank_lines_tier_keeps_crlf_endings(
    tool_call: ToolCall, workspace_dir: Path
) -> None:
    (workspace_dir / "f.txt").write_bytes(b"alpha\r\nbeta\r\ngamma\r\ndelta\r\n")
    out = await tool_call(
        "file_patch",
        {"path": "f.txt", "old_string": "\r\nbeta\r\ngamma\r\n\r\n", "new_string": "BETA\r\nGAMMA"},
    )
    assert out["match"] == "blank_lines"
    assert (workspace_dir / "f.txt").read_bytes() == b"alpha\r\nBETA\r\nGAMMA\r\ndelta\r\n"


def test_trim_blank_edges_keeps_the_last_line_ending() -> None:
    assert trim_blank_edges("\nbeta\ngamma\n\n", "BETA\nGAMMA") == (
        "beta\ngamma\n",
        "BETA\nGAMMA\n",
    )
    assert trim_blank_edges("a\n  ", "b") == ("a\n", "b\n")
    assert trim_blank_edges("a\n\n", "") == ("a\n", "")
    assert trim_blank_edges("a\n\n", "b\n\n\n") == ("a\n", "b\n\n")
