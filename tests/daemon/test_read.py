"""file_read and file_multi_read: paging that never skips text, images, budgets."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from airlock.daemon.errors import AirlockError
from tests.daemon.conftest import ToolCall

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


async def test_paging_by_budget_never_skips(tool_call: ToolCall, workspace_dir: Path) -> None:
    lines = [f"line {i:03d} " + "x" * (i % 17) for i in range(1, 301)]
    (workspace_dir / "big.txt").write_text("\n".join(lines) + "\n")
    seen: list[str] = []
    offset: int | None = 1
    while offset is not None:
        page = await tool_call(
            "file_read", {"path": "big.txt", "offset": offset, "budget_chars": 500}
        )
        assert len(page["content"]) <= 500
        assert page["start_line"] == offset
        seen.extend(page["content"].split("\n")[:-1])
        assert page["truncated"] == (page["next_offset"] is not None)
        offset = page["next_offset"]
    assert seen == lines


async def test_limit_and_eof(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "f.txt").write_text("a\nb\nc")
    page = await tool_call("file_read", {"path": "f.txt", "limit": 2})
    assert page["content"] == "a\nb\n" and page["next_offset"] == 3 and page["total_lines"] == 3
    last = await tool_call("file_read", {"path": "f.txt", "offset": 3})
    assert last["content"] == "c" and last["next_offset"] is None and not last["truncated"]
    with pytest.raises(AirlockError) as info:
        await tool_call("file_read", {"path": "f.txt", "offset": 9})
    assert info.value.code == "invalid_request" and "3 lines" in info.value.message


async def test_overlong_first_line(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "min.js").write_text("x" * 5000 + "\nsecond\n")
    page = await tool_call("file_read", {"path": "min.js", "budget_chars": 100})
    assert page["line_truncated"] is True
    assert page["content"] == "x" * 100
    assert page["next_offset"] == 2
    assert "exec" in page["message"]


async def test_empty_file(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "empty").write_text("")
    page = await tool_call("file_read", {"path": "empty"})
    assert page["content"] == "" and page["total_lines"] == 0 and page["next_offset"] is None


async def test_image(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "pic.png").write_bytes(PNG)
    out = await tool_call("file_read", {"path": "pic.png"})
    assert out["kind"] == "image" and out["mime"] == "image/png"
    assert base64.b64decode(out["data_base64"]) == PNG and out["bytes"] == len(PNG)


async def test_huge_image_refused_without_reading(tool_call: ToolCall, workspace_dir: Path) -> None:
    f = workspace_dir / "huge.png"
    with open(f, "wb") as handle:
        handle.write(PNG)
        handle.truncate(33 * 1024 * 1024)  # sparse: refused by size, never read
    with pytest.raises(AirlockError) as info:
        await tool_call("file_read", {"path": "huge.png"})
    assert info.value.code == "too_large"


async def test_directory_and_missing(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "d").mkdir()
    with pytest.raises(AirlockError) as info:
        await tool_call("file_read", {"path": "d"})
    assert info.value.code == "is_directory"
    with pytest.raises(AirlockError) as info:
        await tool_call("file_read", {"path": "nope.txt"})
    assert info.value.code == "not_found"


async def test_multi_read_shares_budget_and_reports_per_file(
    tool_call: ToolCall, workspace_dir: Path
) -> None:
    (workspace_dir / "a.txt").write_text("a" * 60 + "\n")
    (workspace_dir / "b.txt").write_text("b" * 60 + "\n")
    (workspace_dir / "c.txt").write_text("c\n")
    out = await tool_call(
        "file_multi_read",
        {"paths": ["a.txt", "missing.txt", "b.txt", "c.txt"], "budget_chars": 100},
    )
    files = out["files"]
    assert files[0]["content"] == "a" * 60 + "\n"
    assert files[1]["error"]["code"] == "not_found"
    assert files[2]["line_truncated"] is True and len(files[2]["content"]) == 100 - 61
    assert files[3]["error"]["code"] == "too_large"
    assert sum(len(f.get("content", "")) for f in files) <= 100


async def test_unknown_fields_are_rejected(tool_call: ToolCall) -> None:
    with pytest.raises(AirlockError) as info:
        await tool_call("file_read", {"path": "x", "bogus": 1})
    assert info.value.code == "invalid_request" and "bogus" in info.value.message
