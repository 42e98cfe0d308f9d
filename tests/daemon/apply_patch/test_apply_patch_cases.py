"""apply_patch cases the Codex fixtures lack: encodings, matching, hints, parsing, paths."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from airlock.daemon.errors import AirlockError
from tests.daemon.apply_patch.conftest import Apply
from tests.daemon.apply_patch.helpers import patch, snapshot, temp_files
from tests.daemon.conftest import ToolCall


async def refused(apply: Apply, text: str, code: str, **extra: object) -> AirlockError:
    with pytest.raises(AirlockError) as info:
        await apply(text, **extra)
    assert info.value.code == code, info.value.message
    return info.value


# ---------------------------------------------------------------- result shape, both transports


async def test_result_shape_over_both_transports(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "mod.txt").write_text("a\nb\n")
    (workspace_dir / "gone.txt").write_text("x\n")
    (workspace_dir / "old.txt").write_text("keep\n")
    out = await tool_call(
        "apply_patch",
        {
            "patch": patch(
                "*** Add File: new/added.txt",
                "+hello",
                "*** Update File: mod.txt",
                "@@",
                " a",
                "-b",
                "+B",
                "*** Delete File: gone.txt",
                "*** Update File: old.txt",
                "*** Move to: moved/old.txt",
                "@@",
                "-keep",
                "+kept",
            )
        },
    )
    assert out["files"] == [
        {"operation": "add", "path": "new/added.txt", "previous_path": None},
        {"operation": "update", "path": "mod.txt", "previous_path": None},
        {"operation": "delete", "path": "gone.txt", "previous_path": None},
        {"operation": "move", "path": "moved/old.txt", "previous_path": "old.txt"},
    ]
    assert out["diagnostics"] == []
    assert "A new/added.txt" in out["summary"] and "D gone.txt" in out["summary"]
    assert (workspace_dir / "new/added.txt").read_text() == "hello\n"
    assert (workspace_dir / "mod.txt").read_text() == "a\nB\n"
    assert not (workspace_dir / "gone.txt").exists() and not (workspace_dir / "old.txt").exists()
    assert (workspace_dir / "moved/old.txt").read_text() == "kept\n"
    assert temp_files(workspace_dir) == []


async def test_errors_over_both_transports(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "a.txt").write_text("one\ntwo\n")
    with pytest.raises(AirlockError) as info:
        await tool_call(
            "apply_patch",
            {"patch": patch("*** Update File: a.txt", "@@", "-three", "+four")},
        )
    assert info.value.code == "hunk_not_found"
    assert "re-read the file and rewrite only this hunk" in info.value.message
    assert "1 | one" in info.value.message
    assert (workspace_dir / "a.txt").read_text() == "one\ntwo\n"


# ---------------------------------------------------------------- encodings


async def test_crlf_file_stays_crlf(apply: Apply, ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await apply(patch("*** Update File: w.txt", "@@", " one", "-two", "+TWO", "+2.5"))
    assert (ws / "w.txt").read_bytes() == b"one\r\nTWO\r\n2.5\r\nthree\r\n"


async def test_crlf_patch_text_is_accepted(apply: Apply, ws: Path) -> None:
    (ws / "w.txt").write_text("one\ntwo\n")
    text = patch("*** Update File: w.txt", "@@", "-two", "+2").replace("\n", "\r\n")
    await apply(text)
    assert (ws / "w.txt").read_bytes() == b"one\n2\n"


async def test_mixed_endings_keep_untouched_bytes(apply: Apply, ws: Path) -> None:
    (ws / "m.txt").write_bytes(b"a\r\nb\nc\r\nd\n")
    await apply(patch("*** Update File: m.txt", "@@", " b", "-c", "+C", "+C2"))
    # untouched lines keep their own endings; new lines take the first line's ending (CRLF)
    assert (ws / "m.txt").read_bytes() == b"a\r\nb\nC\r\nC2\r\nd\n"


async def test_bom_is_kept(apply: Apply, ws: Path) -> None:
    (ws / "b.txt").write_bytes(b"\xef\xbb\xbfhead\nbody\n")
    await apply(patch("*** Update File: b.txt", "@@", " head", "-body", "+BODY"))
    assert (ws / "b.txt").read_bytes() == b"\xef\xbb\xbfhead\nBODY\n"


async def test_missing_final_newline_is_added(apply: Apply, ws: Path) -> None:
    (ws / "n.txt").write_bytes(b"x\ny")
    await apply(patch("*** Update File: n.txt", "@@", "-x", "+X"))
    assert (ws / "n.txt").read_bytes() == b"X\ny\n"


async def test_binary_update_refused_but_delete_allowed(apply: Apply, ws: Path) -> None:
    (ws / "bin.dat").write_bytes(b"\x00\x01\x02")
    await refused(apply, patch("*** Update File: bin.dat", "@@", "-x", "+y"), "binary_file")
    await apply(patch("*** Delete File: bin.dat"))
    assert not (ws / "bin.dat").exists()


async def test_mode_kept_on_update_and_move(apply: Apply, ws: Path) -> None:
    f = ws / "run.sh"
    f.write_text("#!/bin/sh\necho hi\n")
    os.chmod(f, 0o751)
    await apply(patch("*** Update File: run.sh", "@@", "-echo hi", "+echo bye"))
    assert stat.S_IMODE(f.stat().st_mode) == 0o751
    await apply(patch("*** Update File: run.sh", "*** Move to: bin/run.sh", "@@", " echo bye"))
    assert stat.S_IMODE((ws / "bin/run.sh").stat().st_mode) == 0o751


# ---------------------------------------------------------------- matching


PYFILE = """class A:
    def f(self):
        return 1

class B:
    def f(self):
        return 1
"""


async def test_ambiguous_chunk_names_both_lines(apply: Apply, ws: Path) -> None:
    (ws / "p.py").write_text(PYFILE)
    err = await refused(
        apply,
        patch(
            "*** Update File: p.py",
            "@@",
            "     def f(self):",
            "-        return 1",
            "+        return 2",
        ),
        "ambiguous_match",
    )
    assert "lines 2, 6" in err.message
    assert err.details["lines"] == [2, 6]
    assert (ws / "p.py").read_text() == PYFILE


async def test_hint_makes_chunk_unique(apply: Apply, ws: Path) -> None:
    (ws / "p.py").write_text(PYFILE)
    await apply(
        patch("*** Update File: p.py", "@@ class B", "-        return 1", "+        return 2")
    )
    assert (ws / "p.py").read_text() == PYFILE.replace("return 1\n", "return 2\n").replace(
        "return 2\n", "return 1\n", 1
    )


async def test_hint_is_trimmed_starts_with(apply: Apply, ws: Path) -> None:
    (ws / "p.py").write_text(PYFILE)
    await apply(patch("*** Update File: p.py", "@@ class B:", "@@ def f", "-return 1", "+return 3"))
    assert (ws / "p.py").read_text().endswith("    def f(self):\n        return 3\n")
    assert (ws / "p.py").read_text().count("return 1") == 1


async def test_stacked_hints(apply: Apply, ws: Path) -> None:
    text = "".join(
        f"class {c}:\n    def {m}(self):\n        x = 0\n" for c in "AB" for m in ("f", "g")
    )
    (ws / "s.py").write_text(text)
    await apply(
        patch("*** Update File: s.py", "@@ class B", "@@ def g", "-        x = 0", "+        x = 9")
    )
    lines = (ws / "s.py").read_text().split("\n")
    assert lines[11] == "        x = 9"
    assert (ws / "s.py").read_text().count("x = 9") == 1


async def test_unified_range_header_hint_and_tie_break(apply: Apply, ws: Path) -> None:
    (ws / "p.py").write_text(PYFILE)
    # trailing text is the hint
    await apply(
        patch(
            "*** Update File: p.py",
            "@@ -5,3 +5,3 @@ class B:",
            "-        return 1",
            "+        return 5",
        )
    )
    assert (ws / "p.py").read_text().endswith("return 5\n")
    # no text: the numbers break the tie between lines 3 and 7
    (ws / "q.py").write_text(PYFILE)
    await apply(
        patch("*** Update File: q.py", "@@ -3,1 +3,1 @@", "-        return 1", "+        return 0")
    )
    assert (ws / "q.py").read_text().split("\n")[2] == "        return 0"
    assert (ws / "q.py").read_text().split("\n")[6] == "        return 1"


async def test_typographic_patch_against_ascii_file(apply: Apply, ws: Path) -> None:
    (ws / "t.txt").write_text('say "hello" - wait...\nnext\n')
    await apply(patch("*** Update File: t.txt", "@@", " say “hello” — wait…", "-next", "+after"))
    # the context line keeps the file's own (ASCII) text
    assert (ws / "t.txt").read_text() == 'say "hello" - wait...\nafter\n'


async def test_whitespace_passes(apply: Apply, ws: Path) -> None:
    (ws / "w.py").write_text("def f():\n    a = 1   \n    b = 2\n")
    await apply(patch("*** Update File: w.py", "@@", " a = 1", "-b = 2", "+b = 3", "+c = 4"))
    # matched ignoring indentation: added lines take the file's indentation offset
    assert (ws / "w.py").read_text() == "def f():\n    a = 1   \n    b = 3\n    c = 4\n"


async def test_pure_addition_after_hint_and_at_eof(apply: Apply, ws: Path) -> None:
    (ws / "a.txt").write_text("top\nmid\nend\n")
    await apply(patch("*** Update File: a.txt", "@@ mid", "+after mid", "@@", "+tail"))
    assert (ws / "a.txt").read_text() == "top\nmid\nafter mid\nend\ntail\n"


async def test_end_of_file_anchor(apply: Apply, ws: Path) -> None:
    (ws / "e.txt").write_text("x\ny\nx\ny\n")
    await apply(patch("*** Update File: e.txt", "@@", " x", "-y", "+Y", "*** End of File"))
    assert (ws / "e.txt").read_text() == "x\ny\nx\nY\n"


async def test_context_line_that_looks_like_a_header(apply: Apply, ws: Path) -> None:
    (ws / "doc.md").write_text("intro\n*** Delete File: x\nold\n")
    await apply(patch("*** Update File: doc.md", "@@", " *** Delete File: x", "-old", "+new"))
    assert (ws / "doc.md").read_text() == "intro\n*** Delete File: x\nnew\n"


async def test_all_failures_collected(apply: Apply, ws: Path) -> None:
    (ws / "a.txt").write_text("alpha\nbeta\n")
    (ws / "b.txt").write_text("gamma\ndelta\n")
    err = await refused(
        apply,
        patch(
            "*** Add File: c.txt",
            "+new",
            "*** Update File: a.txt",
            "@@",
            "-alpah",
            "+A",
            "*** Update File: b.txt",
            "@@",
            "-gamma",
            "+G",
            "@@",
            "-dleta",
            "+D",
        ),
        "hunk_not_found",
    )
    assert "2 problems" in err.message
    assert "a.txt: chunk 1" in err.message and "b.txt: chunk 2" in err.message
    assert err.message.count("re-read the file and rewrite only this hunk") == 2
    assert "1 | alpha" in err.message and "2 | delta" in err.message
    assert [f["path"] for f in err.details["failures"]] == ["a.txt", "b.txt"]
    assert not (ws / "c.txt").exists()
    assert (ws / "b.txt").read_text() == "gamma\ndelta\n"


async def test_missing_file_and_directory(apply: Apply, ws: Path) -> None:
    (ws / "d").mkdir()
    await refused(apply, patch("*** Update File: nope.txt", "@@", "-a", "+b"), "not_found")
    await refused(apply, patch("*** Delete File: nope.txt"), "not_found")
    await refused(apply, patch("*** Delete File: d"), "is_directory")
    await refused(apply, patch("*** Add File: d", "+x"), "conflict")


async def test_add_and_move_never_overwrite(apply: Apply, ws: Path) -> None:
    (ws / "a.txt").write_text("a\n")
    (ws / "b.txt").write_text("b\n")
    err = await refused(apply, patch("*** Add File: a.txt", "+new"), "conflict")
    assert "already exists" in err.message
    await refused(
        apply, patch("*** Update File: a.txt", "*** Move to: b.txt", "@@", "-a", "+A"), "conflict"
    )
    (ws / "dir").mkdir()
    await refused(
        apply, patch("*** Update File: a.txt", "*** Move to: dir", "@@", "-a", "+A"), "conflict"
    )
    assert snapshot(ws) == {"a.txt": b"a\n", "b.txt": b"b\n", "dir": None}


async def test_move_onto_own_path_is_update(apply: Apply, ws: Path) -> None:
    (ws / "a.txt").write_text("a\n")
    out = await apply(patch("*** Update File: a.txt", "*** Move to: a.txt", "@@", "-a", "+A"))
    assert out["files"] == [{"operation": "update", "path": "a.txt", "previous_path": None}]
    assert (ws / "a.txt").read_text() == "A\n"


# ---------------------------------------------------------------- parsing


async def test_heredoc_and_environment_id(apply: Apply, ws: Path) -> None:
    await apply("<<'EOF'\n" + patch("*** Add File: h.txt", "+heredoc") + "EOF\n")
    assert (ws / "h.txt").read_text() == "heredoc\n"
    await apply("*** Environment ID: abc123\n\n" + patch("*** Add File: e.txt", "+env"))
    assert (ws / "e.txt").read_text() == "env\n"
    await refused(apply, "hello\n" + patch("*** Add File: z.txt", "+z"), "patch_parse_error")
    await apply("\ufeff" + patch("*** Add File: bom.txt", "+b"))
    assert (ws / "bom.txt").read_text() == "b\n"


async def test_content_after_end_refused(apply: Apply, ws: Path) -> None:
    err = await refused(
        apply, patch("*** Add File: a.txt", "+a") + "*** Add File: b.txt\n+b\n", "patch_parse_error"
    )
    assert "after '*** End Patch'" in err.message
    await refused(apply, patch("*** Add File: a.txt", "+a") + "trailing\n", "patch_parse_error")
    assert snapshot(ws) == {}


async def test_add_lines_must_start_with_plus(apply: Apply, ws: Path) -> None:
    err = await refused(apply, patch("*** Add File: a.txt", "+one", "two"), "patch_parse_error")
    assert "must start with '+'" in err.message
    assert not (ws / "a.txt").exists()


async def test_missing_markers(apply: Apply) -> None:
    await refused(apply, "*** Add File: a.txt\n+a\n*** End Patch\n", "patch_parse_error")
    await refused(apply, "*** Begin Patch\n*** Add File: a.txt\n+a\n", "patch_parse_error")
    await refused(apply, "", "patch_parse_error")
    await refused(apply, patch(), "patch_parse_error")


async def test_bad_chunk_line(apply: Apply, ws: Path) -> None:
    (ws / "a.txt").write_text("a\n")
    err = await refused(
        apply, patch("*** Update File: a.txt", "@@", "-a", "?b"), "patch_parse_error"
    )
    assert "line 5" in err.message


@pytest.mark.parametrize(
    "bad", ["../outside.txt", "/etc/passwd", "a/./b.txt", "a//b.txt", "a\\b.txt"]
)
async def test_bad_paths_refused(apply: Apply, ws: Path, bad: str) -> None:
    await refused(apply, patch(f"*** Add File: {bad}", "+x"), "patch_parse_error")
    assert snapshot(ws) == {}
    assert not (ws.parent / "outside.txt").exists()


async def test_symlink_leaving_root(apply: Apply, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s\n")
    os.symlink(outside, ws / "link")
    await refused(apply, patch("*** Add File: link/new.txt", "+x"), "path_escape")
    await refused(apply, patch("*** Update File: link/secret.txt", "@@", "-s", "+S"), "path_escape")
    assert (outside / "secret.txt").read_text() == "s\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_symlink_leaving_patch_root_inside_workspace(apply: Apply, ws: Path) -> None:
    (ws / "sub").mkdir()
    (ws / "other").mkdir()
    os.symlink(ws / "other", ws / "sub" / "link")
    await refused(apply, patch("*** Add File: link/x.txt", "+x"), "path_escape", root="sub")
    await apply(patch("*** Add File: y.txt", "+y"), root="sub")
    assert (ws / "sub/y.txt").read_text() == "y\n"


async def test_generated_file_refused(apply: Apply, ws: Path) -> None:
    await refused(apply, patch("*** Add File: node_modules/x.js", "+x"), "generated_file")
    await refused(apply, patch("*** Add File: package-lock.json", "+{}"), "generated_file")


async def test_two_operations_on_one_path(apply: Apply, ws: Path) -> None:
    (ws / "a.txt").write_text("a\n")
    (ws / "b.txt").write_text("b\n")
    await refused(
        apply,
        patch("*** Update File: a.txt", "@@", "-a", "+A", "*** Delete File: a.txt"),
        "patch_parse_error",
    )
    await refused(
        apply,
        patch(
            "*** Update File: a.txt",
            "*** Move to: c.txt",
            "@@",
            "-a",
            "+A",
            "*** Add File: c.txt",
            "+c",
        ),
        "patch_parse_error",
    )
    os.symlink(ws / "b.txt", ws / "alias.txt")
    await refused(
        apply,
        patch(
            "*** Update File: b.txt",
            "@@",
            "-b",
            "+B",
            "*** Update File: alias.txt",
            "@@",
            "-b",
            "+C",
        ),
        "patch_parse_error",
    )
    assert (ws / "a.txt").read_text() == "a\n" and (ws / "b.txt").read_text() == "b\n"


async def test_operation_limit(apply: Apply, ws: Path) -> None:
    body = [line for i in range(101) for line in (f"*** Add File: f{i}.txt", "+x")]
    err = await refused(apply, patch(*body), "patch_parse_error")
    assert "100" in err.message
    assert snapshot(ws) == {}
    body = [line for i in range(100) for line in (f"*** Add File: f{i}.txt", "+x")]
    out = await apply(patch(*body))
    assert len(out["files"]) == 100


async def test_character_limit(apply: Apply) -> None:
    big = patch("*** Add File: big.txt", *(["+" + "x" * 99] * 5001))
    assert len(big) > 500_000
    await refused(apply, big, "invalid_request")


async def test_big_file_many_chunks(apply: Apply, ws: Path) -> None:
    lines = [f"line {i:07d} " + "y" * 60 for i in range(30_000)]
    (ws / "big.txt").write_text("\n".join(lines) + "\n")
    assert (ws / "big.txt").stat().st_size > 2_000_000
    body = ["*** Update File: big.txt"]
    expected = list(lines)
    for k in range(200):
        i = 100 + k * 140
        body += ["@@", f" {lines[i - 1]}", f"-{lines[i]}", f"+changed {i}", f" {lines[i + 1]}"]
        expected[i] = f"changed {i}"
    await apply(patch(*body))
    assert (ws / "big.txt").read_text() == "\n".join(expected) + "\n"


async def test_bare_move_is_a_byte_exact_rename(apply: Apply, ws: Path) -> None:
    (ws / "raw.bin").write_bytes(b"\x00\x01no newline")
    out = await apply(patch("*** Update File: raw.bin", "*** Move to: sub/raw.bin"))
    assert out["files"] == [
        {"operation": "move", "path": "sub/raw.bin", "previous_path": "raw.bin"}
    ]
    assert snapshot(ws) == {"sub": None, "sub/raw.bin": b"\x00\x01no newline"}
    await refused(apply, patch("*** Update File: sub/raw.bin"), "patch_parse_error")


async def test_delete_or_move_of_a_symlink_refused(apply: Apply, ws: Path) -> None:
    (ws / "real.txt").write_text("r\n")
    os.symlink(ws / "real.txt", ws / "link.txt")
    await refused(apply, patch("*** Delete File: link.txt"), "invalid_request")
    await refused(
        apply,
        patch("*** Update File: link.txt", "*** Move to: moved.txt", "@@", "-r", "+R"),
        "invalid_request",
    )
    # updating through the link edits the file it points to, and keeps the link
    await apply(patch("*** Update File: link.txt", "@@", "-r", "+R"))
    assert (ws / "real.txt").read_text() == "R\n" and (ws / "link.txt").is_symlink()


async def test_file_and_path_under_it_refused(apply: Apply, ws: Path) -> None:
    err = await refused(
        apply, patch("*** Add File: a", "+x", "*** Add File: a/b.txt", "+y"), "patch_parse_error"
    )
    assert "cannot lie under it" in err.message
    assert snapshot(ws) == {}


async def test_diagnostics_report_only_new_problems(apply: Apply, ws: Path) -> None:
    (ws / "old.py").write_text("def g(:\n    pass\n")  # broken before the patch
    out = await apply(
        patch(
            "*** Add File: new.py",
            "+def f(:",
            "+    pass",
            "*** Update File: old.py",
            "@@",
            "-    pass",
            "+    return 1",
        )
    )
    assert {d["path"] for d in out["diagnostics"]} == {"new.py"}
    assert any(d["check"] == "syntax" for d in out["diagnostics"])
    quiet = await apply(patch("*** Add File: other.py", "+def h(:"), diagnostics=False)
    assert quiet["diagnostics"] == []


async def test_trailing_blank_line_of_a_chunk_is_a_separator(apply: Apply, ws: Path) -> None:
    (ws / "a.py").write_text("def f():\n    return 1\n")
    await apply(patch("*** Update File: a.py", "@@", "-    return 1", "+    return 2", ""))
    assert (ws / "a.py").read_text() == "def f():\n    return 2\n"
    # an addition-only chunk closed by a blank line is still a pure addition after its hint
    (ws / "b.py").write_text("def f():\n    pass\ndef g():\n    pass\n")
    await apply(patch("*** Update File: b.py", "@@ def f", "+    # note", ""))
    assert (ws / "b.py").read_text() == "def f():\n    # note\n    pass\ndef g():\n    pass\n"


async def test_hint_repeated_as_first_context_line(apply: Apply, ws: Path) -> None:
    (ws / "p.py").write_text(PYFILE)
    await apply(
        patch(
            "*** Update File: p.py",
            "@@ class B:",
            " class B:",
            "     def f(self):",
            "-        return 1",
            "+        return 7",
        )
    )
    assert (ws / "p.py").read_text().endswith("class B:\n    def f(self):\n        return 7\n")
    assert (ws / "p.py").read_text().count("return 1") == 1


async def test_many_failures_are_listed_compactly(apply: Apply, ws: Path) -> None:
    lines = [f"row {i}" for i in range(5_000)]
    (ws / "rows.txt").write_text("\n".join(lines) + "\n")
    body = ["*** Update File: rows.txt"]
    for k in range(200):
        body += ["@@", f" row {k * 20}", f"-row {k * 20 + 1} typo", f"+row {k * 20 + 1} fixed"]
    err = await refused(apply, patch(*body), "hunk_not_found")
    assert len(err.details["failures"]) == 200
    assert "The patch has 200 problems" in err.message
    assert "... and 170 more" in err.message
    assert err.message.count("The closest current lines are:\n") == 30
    assert err.message.count("(not shown: more than 10 chunks") == 20
    assert "2 | row 1\n" in err.message  # the first failure's excerpt is numbered
