"""Limits, exact truncation, the output/line/response caps and the timeout."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path

import pytest

from airlock.daemon.errors import AirlockError
from airlock.daemon.search.engine import resolve_engine
from airlock.daemon.search.limits import LINE_CUT_MARKER, RESPONSE_CAP
from airlock.daemon.search.rg import CountParser
from airlock.daemon.search.runner import RunOutcome, run_engine, timeout_message
from tests.daemon.search.support import Call, forced, write
from tests.fakes.wait import wait_until


@pytest.fixture
def three_hits(ws: Path) -> None:
    write(ws, {"a.txt": "hit\n", "b.txt": "hit\n", "c.txt": "hit\n", "d.txt": "miss\n"})


@pytest.mark.usefixtures("three_hits")
@pytest.mark.parametrize("mode", ["files_with_matches", "count", "content"])
async def test_limit_truncation_is_exact(call: Call, mode: str) -> None:
    key = {"files_with_matches": "files", "count": "counts", "content": "matches"}[mode]
    two = await call("file_search", {"pattern": "hit", "output_mode": mode, "limit": 2})
    assert len(two[key]) == 2 and two["truncated"] is True
    three = await call("file_search", {"pattern": "hit", "output_mode": mode, "limit": 3})
    assert len(three[key]) == 3 and three["truncated"] is False
    assert three["total"] == 3


@pytest.mark.usefixtures("three_hits")
async def test_offset_pages_through_without_gaps(call: Call) -> None:
    first = await call("file_search", {"pattern": "hit", "limit": 2})
    second = await call("file_search", {"pattern": "hit", "limit": 2, "offset": 2})
    assert first["files"] + second["files"] == ["a.txt", "b.txt", "c.txt"]
    assert second["truncated"] is False
    beyond = await call("file_search", {"pattern": "hit", "offset": 10})
    assert beyond["files"] == [] and beyond["truncated"] is False


async def test_one_ten_megabyte_line_hits_the_output_cap(call: Call, ws: Path) -> None:
    (ws / "huge.txt").write_bytes(b"x" * (10 * 1024 * 1024) + b"needle\n")
    out = await asyncio.wait_for(
        call("file_search", {"pattern": "needle", "output_mode": "content"}), 30
    )
    assert out["truncated"] is True
    assert out["total"] is None
    assert "256 KiB" in (out["note"] or "")
    assert len(json.dumps(out)) < RESPONSE_CAP
    # The line that was cut by the cap is still reported, cut at 8 KiB with the marker.
    assert [(m["path"], m["line"]) for m in out["matches"]] == [("huge.txt", 1)]
    assert out["matches"][0]["text"].endswith(LINE_CUT_MARKER)
    assert len(out["matches"][0]["text"].encode()) <= 8 * 1024 + len(LINE_CUT_MARKER)
    # files_with_matches prints one path per file: no cap, an exact answer.
    files = await call("file_search", {"pattern": "needle"})
    assert files["files"] == ["huge.txt"] and files["truncated"] is False


async def test_long_line_cut_at_8_kib(call: Call, ws: Path) -> None:
    write(ws, {"wide.txt": "short needle\n" + "y" * 20000 + " needle\n"})
    out = await call("file_search", {"pattern": "needle", "output_mode": "content"})
    short, wide = out["matches"]
    assert short["text"] == "short needle"
    assert wide["line"] == 2
    assert wide["text"] == "y" * 8192 + LINE_CUT_MARKER
    assert out["truncated"] is False and out["total"] == 2


async def test_response_fits_64_kib(call: Call, ws: Path) -> None:
    # 200 matches of 7 KiB each would be 1.4 MiB of JSON.
    write(ws, {f"f{i:03}.txt": "needle " + "z" * 7000 + "\n" for i in range(60)})
    out = await call("file_search", {"pattern": "needle", "output_mode": "content", "limit": 200})
    body = json.dumps(out, ensure_ascii=False).encode()
    assert len(body) < RESPONSE_CAP
    returned = len(out["matches"])
    assert 0 < returned < 60
    assert out["truncated"] is True
    assert f"offset={returned}" in out["note"]


async def test_wide_context_row_is_tightened_not_dropped(call: Call, ws: Path) -> None:
    lines = ["c" * 8000] * 10 + ["needle " + "n" * 8000] + ["c" * 8000] * 10
    write(ws, {"ctx.txt": "\n".join(lines) + "\n"})
    out = await call("file_search", {"pattern": "needle", "output_mode": "content", "context": 10})
    assert len(json.dumps(out).encode()) < RESPONSE_CAP
    (row,) = out["matches"]
    assert row["line"] == 11 and len(row["context_before"]) == 10


async def test_a_fifo_is_refused_before_any_engine_runs(
    monkeypatch: pytest.MonkeyPatch, ws: Path, tmp_path: Path, engine: str
) -> None:
    # A FIFO nobody writes to would block an engine forever: it is refused up front.
    os.mkfifo(ws / "pipe")
    workspace = await forced(monkeypatch, ws, tmp_path, engine)
    before = _children()
    with pytest.raises(AirlockError) as err:
        await asyncio.wait_for(workspace.call("file_search", {"pattern": "x", "path": "pipe"}), 20)
    assert err.value.code == "invalid_request" and "not a regular file" in err.value.message
    assert _children() <= before


async def _engine_on_fifo(
    monkeypatch: pytest.MonkeyPatch, ws: Path, tmp_path: Path, engine: str, deadline: float
) -> RunOutcome:
    """The real engine reading a FIFO nobody writes to (it blocks until it is killed).

    The tools never hand an engine a FIFO any more, so the runner's own kill path
    is driven directly.
    """
    os.mkfifo(ws / "pipe")
    workspace = await forced(monkeypatch, ws, tmp_path, engine)
    resolved = await resolve_engine(workspace.ctx)
    assert resolved is not None
    argv = [resolved.path, "-e", "x", "--", "pipe"]
    return await run_engine(argv, cwd=ws, parser=CountParser(None), deadline=deadline)


async def test_timeout_kills_engine_and_says_so(
    monkeypatch: pytest.MonkeyPatch, ws: Path, tmp_path: Path, engine: str
) -> None:
    before = _children()
    loop = asyncio.get_running_loop()
    outcome = await asyncio.wait_for(
        _engine_on_fifo(monkeypatch, ws, tmp_path, engine, loop.time() + 0.5), 20
    )
    assert outcome.timed_out
    assert "0.5 s" in timeout_message(0.5) and "killed" in timeout_message(0.5)
    with contextlib.suppress(AssertionError):
        await wait_until(lambda: _children() <= before, timeout=5)
    assert _children() <= before


def _children() -> set[int]:
    """Live child processes of this test process (zombies excluded)."""
    me = os.getpid()
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry.name))
    return found


async def test_cancelled_search_kills_engine(
    monkeypatch: pytest.MonkeyPatch, ws: Path, tmp_path: Path, engine: str
) -> None:
    before = _children()
    loop = asyncio.get_running_loop()
    task = asyncio.create_task(_engine_on_fifo(monkeypatch, ws, tmp_path, engine, loop.time() + 60))
    with contextlib.suppress(AssertionError):
        await wait_until(lambda: _children() - before, timeout=5)
    assert _children() - before, "the engine should be running on the FIFO"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with contextlib.suppress(AssertionError):
        await wait_until(lambda: not (_children() - before), timeout=5)
    assert not (_children() - before)
