"""Property-based tests (hypothesis).

* Random files and random edits, rendered as Codex patches, apply to exactly
  the intended text (pure planner, and end to end through the workspace).
* Random garbage, and random arrangements of real patch syntax, never raise
  anything but a structured error, and never leave a temp file behind.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airlock.daemon.apply_patch.matcher import ChunkPlacer
from airlock.daemon.apply_patch.parser import UpdateFile, parse_patch
from airlock.daemon.context import DaemonConfig
from airlock.daemon.errors import AirlockError
from airlock.daemon.workspace import Workspace
from tests.daemon.apply_patch.helpers import patch, temp_files

# Line text: anything but the line separators the codec and the format use.
TEXT = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\n\r\x00"),
    max_size=12,
)


@dataclass
class Region:
    start: int
    length: int
    new: list[str]


@st.composite
def files_and_edits(draw: st.DrawFn) -> tuple[list[str], list[Region], list[int]]:
    """A file of unique lines and non-overlapping edits, each with its context size."""
    count = draw(st.integers(min_value=1, max_value=40))
    lines = [f"{i}:{draw(TEXT)}" for i in range(count)]
    regions: list[Region] = []
    contexts: list[int] = []
    pos = 0
    while pos <= count:
        gap = draw(st.integers(min_value=0, max_value=6))
        start = pos + gap
        if start > count or len(regions) >= 6:
            break
        length = draw(st.integers(min_value=0, max_value=min(4, count - start)))
        new = [f"new{len(regions)}.{k}:{draw(TEXT)}" for k in range(draw(st.integers(0, 3)))]
        if length == 0 and not new:
            new = [f"new{len(regions)}:inserted"]
        regions.append(Region(start, length, new))
        contexts.append(draw(st.integers(min_value=0, max_value=3)))
        pos = start + length + 1  # at least one untouched line between regions
    if not regions:
        regions.append(Region(count, 0, ["tail"]))
        contexts.append(0)
    return lines, regions, contexts


def render(
    path: str,
    lines: list[str],
    regions: list[Region],
    contexts: list[int],
    slip: Callable[[str], str] = lambda line: line,
) -> str:
    """The Codex patch for ``regions``; ``slip`` alters how old lines are quoted."""
    body = [f"*** Update File: {path}"]
    floor = 0  # chunks may not share context lines (a unified diff would merge them)
    for n, (region, ctx) in enumerate(zip(regions, contexts, strict=True)):
        if region.length == 0 and ctx == 0:
            ctx = 1  # a pure insertion needs an anchor to land mid-file
        end = region.start + region.length
        ceiling = regions[n + 1].start if n + 1 < len(regions) else len(lines)
        before = lines[max(floor, region.start - ctx) : region.start]
        after = lines[end : min(end + ctx, ceiling)]
        floor = region.start + region.length + len(after)
        if region.length == 0 and not before and not after:
            # empty file: a pure-addition chunk lands at the end
            body += ["@@", *(f"+{x}" for x in region.new)]
            continue
        body.append("@@")
        body += [f" {slip(x)}" for x in before]
        body += [f"-{slip(x)}" for x in lines[region.start : region.start + region.length]]
        body += [f"+{x}" for x in region.new]
        body += [f" {slip(x)}" for x in after]
    return patch(*body)


def intended(lines: list[str], regions: list[Region]) -> list[str]:
    out = list(lines)
    for region in reversed(regions):
        out[region.start : region.start + region.length] = region.new
    return out


@settings(max_examples=300, deadline=None)
@given(files_and_edits())
def test_random_edits_plan_to_the_intended_lines(
    case: tuple[list[str], list[Region], list[int]],
) -> None:
    lines, regions, contexts = case
    ops = parse_patch(render("f.txt", lines, regions, contexts))
    assert len(ops) == 1 and isinstance(ops[0], UpdateFile)
    result = ChunkPlacer(lines, "f.txt").place(ops[0].chunks)
    assert result.failures == []
    assert result.lines == intended(lines, regions)


TYPOGRAPHIC_SLIPS = {"'": "\u2019", '"': "\u201c", "-": "\u2014", "...": "\u2026", " ": "\u00a0"}


@settings(max_examples=300, deadline=None)
@given(files_and_edits(), st.randoms(use_true_random=False))
def test_whitespace_and_typography_slips_still_apply_exactly(
    case: tuple[list[str], list[Region], list[int]], rng: random.Random
) -> None:
    """A model's slips in old lines still land, and context keeps the file's own text."""
    lines, regions, contexts = case

    def slip(line: str) -> str:
        choice = rng.randrange(3)
        if choice == 1:
            return line + " " * rng.randrange(1, 4)
        if choice == 2:
            for ascii_text, fancy in TYPOGRAPHIC_SLIPS.items():
                line = line.replace(ascii_text, fancy)
        return line

    ops = parse_patch(render("f.txt", lines, regions, contexts, slip))
    assert isinstance(ops[0], UpdateFile)
    result = ChunkPlacer(lines, "f.txt").place(ops[0].chunks)
    assert result.failures == []
    assert result.lines == intended(lines, regions)


def _workspace(root: Path) -> Workspace:
    ws = root / "ws"
    ws.mkdir()
    return Workspace(
        DaemonConfig(workspace=ws, artifacts_dir=root / "artifacts", state_dir=root / "state")
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files_and_edits(), st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_random_edits_write_the_intended_bytes(
    case: tuple[list[str], list[Region], list[int]], ending: str, bom: bool
) -> None:
    lines, regions, contexts = case
    with tempfile.TemporaryDirectory(prefix="al-h-") as tmp:
        workspace = _workspace(Path(tmp))
        target = workspace.config.workspace / "f.txt"
        prefix = b"\xef\xbb\xbf" if bom else b""
        target.write_bytes(prefix + "".join(x + ending for x in lines).encode())
        text = render("f.txt", lines, regions, contexts)
        asyncio.run(workspace.call("apply_patch", {"patch": text, "diagnostics": False}))
        want = "".join(x + ending for x in intended(lines, regions))
        assert target.read_bytes() == prefix + want.encode()
        assert temp_files(workspace.config.workspace) == []


PIECES = st.sampled_from(
    [
        "*** Begin Patch",
        "*** End Patch",
        " *** End Patch",
        "*** Add File: a.txt",
        "*** Add File: ../x.txt",
        "*** Add File: /abs.txt",
        "*** Update File: a.txt",
        "*** Update File: b.txt",
        "*** Delete File: b.txt",
        "*** Delete File: d",
        "*** Move to: c.txt",
        "*** Move to: b.txt",
        "*** End of File",
        "*** Environment ID: 7",
        "*** Frobnicate File: a",
        "<<'EOF'",
        "EOF",
        "@@",
        "@@ one",
        "@@ -1,2 +1,2 @@",
        "@@ -1 +1 @@ two",
        " one",
        " two",
        "-one",
        "-two",
        "-three",
        "+uno",
        "+",
        "",
        "   ",
        "\t",
        "x",
        "…",
    ]
)
GARBAGE = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(PIECES, TEXT), max_size=30).map("\n".join),
    st.lists(st.one_of(PIECES, TEXT), max_size=30).map(
        lambda xs: "*** Begin Patch\n" + "\n".join(xs) + "\n*** End Patch\n"
    ),
)
ALLOWED = {
    "patch_parse_error",
    "hunk_not_found",
    "ambiguous_match",
    "not_found",
    "conflict",
    "is_directory",
    "path_escape",
    "generated_file",
    "invalid_request",
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(GARBAGE)
def test_garbage_only_ever_raises_structured_errors(text: str) -> None:
    with tempfile.TemporaryDirectory(prefix="al-g-") as tmp:
        workspace = _workspace(Path(tmp))
        root = workspace.config.workspace
        (root / "a.txt").write_text("one\ntwo\nthree\none\n")
        (root / "b.txt").write_text("two\n")
        (root / "d").mkdir()
        try:
            asyncio.run(workspace.call("apply_patch", {"patch": text, "diagnostics": False}))
        except AirlockError as exc:
            assert exc.code in ALLOWED, (exc.code, exc.message)
            assert exc.message
            assert (root / "a.txt").read_text() == "one\ntwo\nthree\none\n"
        assert temp_files(root) == []
        assert not (Path(tmp) / "x.txt").exists()
