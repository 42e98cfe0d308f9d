"""The text codec through the editing tools: a file's conventions survive an edit."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airlock.daemon.errors import AirlockError
from airlock.daemon.text import decode, split_lines
from tests.daemon.conftest import ToolCall


async def patch(call: ToolCall, path: str, old: str, new: str) -> dict[str, object]:
    return await call("file_patch", {"path": path, "old_string": old, "new_string": new})


async def test_bom_is_kept(tool_call: ToolCall, workspace_dir: Path) -> None:
    f = workspace_dir / "bom.txt"
    f.write_bytes(b"\xef\xbb\xbfalpha\nbeta\n")
    read = await tool_call("file_read", {"path": "bom.txt"})
    assert read["content"] == "alpha\nbeta\n" and read["bom"] is True
    await patch(tool_call, "bom.txt", "alpha", "ALPHA")
    assert f.read_bytes() == b"\xef\xbb\xbfALPHA\nbeta\n"


async def test_crlf_file_stays_crlf(tool_call: ToolCall, workspace_dir: Path) -> None:
    f = workspace_dir / "win.txt"
    f.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    read = await tool_call("file_read", {"path": "win.txt"})
    assert read["content"] == "one\ntwo\nthree\n" and read["line_ending"] == "crlf"
    await patch(tool_call, "win.txt", "two\nthree", "two\n2.5\nthree")
    assert f.read_bytes() == b"one\r\ntwo\r\n2.5\r\nthree\r\n"


async def test_mixed_file_keeps_untouched_lines_byte_exact(
    tool_call: ToolCall, workspace_dir: Path
) -> None:
    f = workspace_dir / "mixed.txt"
    f.write_bytes(b"a\r\nb\nc\r\nd\n")
    await patch(tool_call, "mixed.txt", "c", "C\nnew")
    # Untouched lines keep their own endings; new lines take the first line's (CRLF).
    assert f.read_bytes() == b"a\r\nb\nC\r\nnew\r\nd\n"


async def test_missing_final_newline_is_preserved(tool_call: ToolCall, workspace_dir: Path) -> None:
    f = workspace_dir / "nofinal.txt"
    f.write_bytes(b"x = 1\ny = 2")
    await patch(tool_call, "nofinal.txt", "y = 2", "y = 3")
    assert f.read_bytes() == b"x = 1\ny = 3"
    await patch(tool_call, "nofinal.txt", "x = 1", "x = 0")
    assert f.read_bytes() == b"x = 0\ny = 3"


async def test_form_feed_and_line_separator_survive(
    tool_call: ToolCall, workspace_dir: Path
) -> None:
    f = workspace_dir / "odd.txt"
    content = "first\x0cstill first\nsecond \u2028 still second\nthird\n"
    f.write_text(content, encoding="utf-8")
    read = await tool_call("file_read", {"path": "odd.txt"})
    assert read["total_lines"] == 3
    assert read["content"] == content
    await patch(tool_call, "odd.txt", "third", "THIRD")
    assert f.read_text(encoding="utf-8") == content.replace("third", "THIRD")


async def test_non_utf8_is_refused(tool_call: ToolCall, workspace_dir: Path) -> None:
    f = workspace_dir / "latin1.txt"
    f.write_bytes("caf\xe9\n".encode("latin-1"))
    for name, args in (
        ("file_read", {"path": "latin1.txt"}),
        ("file_patch", {"path": "latin1.txt", "old_string": "caf", "new_string": "tea"}),
    ):
        with pytest.raises(AirlockError) as info:
            await tool_call(name, args)
        assert info.value.code == "binary_file"
    assert f.read_bytes() == "caf\xe9\n".encode("latin-1")


async def test_nul_is_binary(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "blob").write_bytes(b"abc\x00def")
    with pytest.raises(AirlockError) as info:
        await tool_call("file_read", {"path": "blob"})
    assert info.value.code == "binary_file"


def test_split_lines_only_on_newline() -> None:
    assert split_lines("a\x0cb\u2028c\nd\n") == ["a\x0cb\u2028c", "d"]
    assert split_lines("") == []
    assert split_lines("x") == ["x"]


line_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\r\n\x00"),
    max_size=12,
)


@given(
    lines=st.lists(line_text, min_size=1, max_size=12),
    endings=st.lists(st.sampled_from(["\n", "\r\n"]), min_size=12, max_size=12),
    final=st.booleans(),
    bom=st.booleans(),
)
def test_decode_encode_round_trips(
    lines: list[str], endings: list[str], final: bool, bom: bool
) -> None:
    body = "".join(
        line + (endings[i] if i < len(lines) - 1 or final else "") for i, line in enumerate(lines)
    )
    raw = (b"\xef\xbb\xbf" if bom else b"") + body.encode()
    decoded = decode(raw)
    assert "\r\n" not in decoded.text
    assert decoded.encode(decoded.text) == raw


def _ending_by_counts(text: str) -> str:
    """The definition ``decode`` follows, by counting every ending (its slow path)."""
    crlf, lf = text.count("\r\n"), text.count("\n")
    if lf == 0:
        return "none"
    if crlf == lf:
        return "crlf"
    return "lf" if crlf == 0 else "mixed"


@given(text=st.text(alphabet="a \t\r\n\u2028\x0c\u00e9", max_size=40), bom=st.booleans())
def test_decode_classifies_endings_as_counting_would(text: str, bom: bool) -> None:
    """The no-"\\r" fast path answers what counting CRLF and LF answers (lone CRs too)."""
    raw = (b"\xef\xbb\xbf" if bom else b"") + text.encode()
    decoded = decode(raw)
    assert decoded.line_ending == _ending_by_counts(text)
    assert decoded.bom is bom
    if decoded.line_ending in ("lf", "none"):
        # The fast path's answers: the text as it is, written back byte for byte.
        assert decoded.text == text
        assert decoded.encode(decoded.text) == raw
