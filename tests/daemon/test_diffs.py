"""daemon/diffs.py: patience-anchored unified diffs that apply exactly, and the budget summary."""

from __future__ import annotations

import difflib
import random
import re

from airlock.daemon.diffs import unified_diff


def apply_unified(diff: str, old: str) -> str:
    """Apply a unified diff of LF text (with "No newline" markers) to ``old``."""
    lines = old.split("\n")
    src = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    out: list[str] = []
    pos = 0
    rows = diff.split("\n")[2:]  # past --- and +++
    k = 0
    last = ""
    while k < len(rows):
        head = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", rows[k])
        assert head, rows[k]
        start = int(head.group(1)) - (1 if head.group(2) != "0" else 0)
        out.extend(src[pos:start])
        pos = start
        k += 1
        while k < len(rows) and not rows[k].startswith("@@"):
            row = rows[k]
            k += 1
            if not row:
                continue
            if row.startswith("\\"):
                if last in " +":
                    out[-1] = out[-1].removesuffix("\n")
                continue
            last = row[0]
            if row[0] == " ":
                out.append(src[pos])
                pos += 1
            elif row[0] == "-":
                pos += 1
            else:
                out.append(row[1:] + "\n")
    out.extend(src[pos:])
    return "".join(out)


def test_random_edits_round_trip() -> None:
    rng = random.Random(12)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    for _ in range(1500):
        old_lines = [rng.choice(alphabet[: rng.randint(3, 36)]) for _ in range(rng.randint(0, 60))]
        new_lines = list(old_lines)
        for _ in range(rng.randint(1, 8)):
            r = rng.random()
            if r < 0.3 and new_lines:
                new_lines.pop(rng.randrange(len(new_lines)))
            elif r < 0.7:
                new_lines.insert(rng.randint(0, len(new_lines)), rng.choice("ABCxyz"))
            elif new_lines:
                new_lines[rng.randrange(len(new_lines))] = rng.choice("XYZ")
        old = "".join(f"{x}\n" for x in old_lines)
        new = "".join(f"{x}\n" for x in new_lines)
        if rng.random() < 0.2:
            new = new.removesuffix("\n")
        diff = unified_diff("f.txt", old, new)
        if old == new:
            assert diff == ""
            continue
        assert diff.startswith("--- a/f.txt\n+++ b/f.txt\n@@ ")
        assert apply_unified(diff, old) == new, (old, new, diff)


def test_small_diffs_match_difflib() -> None:
    old = "".join(f"line {i}\n" for i in range(40))
    new = old.replace("line 7\n", "line seven\n").replace("line 30\n", "")
    expected = "".join(
        difflib.unified_diff(
            old.splitlines(True), new.splitlines(True), "a/x", "b/x", lineterm="\n"
        )
    )
    assert unified_diff("x", old, new) == expected


def test_created_and_deleted_files() -> None:
    assert unified_diff("n.txt", None, "a\nb") == (
        "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n"
    )
    assert unified_diff("n.txt", "a\n", None) == "--- a/n.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"


def test_budget_gives_a_summary_and_a_large_ordinary_edit_does_not() -> None:
    old = "".join(f"v = {i % 500}\n" for i in range(20_000))
    new = "".join(f"v = {(i * 7) % 500}\n" for i in range(20_000))
    summary = unified_diff("big.py", old, new, budget_s=0.2)
    assert summary.startswith("file rewritten, 20000 lines (was 20000)")
    assert "big.py" in summary and "read the file" in summary
    distinct = "".join(f"x{i} = {i}\n" for i in range(50_000))
    edited = distinct.replace("x100 = 100\n", "x100 = 0\n").replace("x40000 = 40000\n", "")
    diff = unified_diff("d.py", distinct, edited, budget_s=30)
    assert apply_unified(diff, distinct) == edited
    assert diff.count("@@ -") == 2
    huge = unified_diff("h.py", distinct, distinct.upper(), max_lines=1000)
    assert huge.startswith("file rewritten, 50000 lines") and "too large" in huge
