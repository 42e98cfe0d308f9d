"""The write half: stale checks, rollback on a failed write, journal replay, serialisation."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import airlock.daemon.apply_patch as engine
from airlock.daemon.apply_patch.planner import plan_changes
from airlock.daemon.commit.committer import commit, roll_back
from airlock.daemon.commit.journal import MANIFEST, Journal, journal_root
from airlock.daemon.errors import AirlockError, StaleWrite
from airlock.daemon.fsio import TEMP_MARKER, PlannedWrite, apply_one
from airlock.daemon.paths import ResolvedPath, Roots
from airlock.daemon.workspace import Workspace
from tests.daemon.apply_patch.conftest import Apply
from tests.daemon.apply_patch.helpers import patch, snapshot, temp_files
from tests.fakes.wait import wait_until


def _journals(workspace: Workspace) -> list[Path]:
    root = journal_root(workspace.config.state, workspace.ctx.roots.workspace)
    return sorted(root.iterdir()) if root.exists() else []


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Writes past ``limit`` bytes fail with EFBIG (works as root, unlike a read-only dir)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


async def test_third_of_four_writes_fails_and_nothing_is_replaced(
    apply: Apply, ws: Path, workspace: Workspace
) -> None:
    """Every new content is staged before the first rename, so a write error (here EFBIG,
    like ENOSPC a data-block failure) meets the patch before anything was replaced."""
    for name in "abcd":
        (ws / name).mkdir()
        (ws / name / "f.txt").write_text(f"{name} old\n")
    (ws / "c" / "f.txt").write_text("c old\n" + "pad\n" * 30_000)  # 120 KB
    before = snapshot(ws)
    body: list[str] = []
    for name in "abcd":
        body += [f"*** Update File: {name}/f.txt", "@@", f"-{name} old", f"+{name} new"]
        if name == "c":
            body += ["@@", *(["+" + "g" * 99] * 1000)]  # ~100 KB more at EOF: past the limit
    with file_size_limit(200_000), pytest.raises(AirlockError) as info:
        await apply(patch(*body), diagnostics=False)
    err = info.value
    assert err.code == "internal"
    assert "c/f.txt" in err.message and "nothing was written" in err.message
    assert err.details["rolled_back"] == []
    assert err.details["not_rolled_back"] == []
    assert snapshot(ws) == before
    assert temp_files(ws) == []
    assert _journals(workspace) == []


def _at(roots: Roots, name: str) -> ResolvedPath:
    return roots.resolve(name, intent="write")


def test_roll_back_never_clobbers_a_file_changed_meanwhile(tmp_path: Path) -> None:
    roots = Roots(workspace=tmp_path)
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("a0\n")
    b.write_text("b0\n")
    writes = [
        PlannedWrite(_at(roots, "a.txt"), before=b"a0\n", after=b"a1\n", display="a.txt"),
        PlannedWrite(_at(roots, "b.txt"), before=b"b0\n", after=b"b1\n", display="b.txt"),
    ]
    for w in writes:
        apply_one(roots, w)
    b.write_text("someone else\n")
    restored, unrestored = roll_back(roots, writes, [])
    assert restored == ["a.txt"] and unrestored == ["b.txt"]
    assert a.read_text() == "a0\n" and b.read_text() == "someone else\n"


def test_commit_refuses_stale_targets(tmp_path: Path) -> None:
    roots = Roots(workspace=tmp_path)
    a, b, c = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    a.write_text("a0\n")
    b.write_text("changed\n")
    c.write_text("appeared\n")
    writes = [
        PlannedWrite(_at(roots, "a.txt"), before=b"a0\n", after=b"a1\n", display="a.txt"),
        PlannedWrite(_at(roots, "b.txt"), before=b"b0\n", after=b"b1\n", display="b.txt"),
        PlannedWrite(_at(roots, "c.txt"), before=None, after=b"c1\n", display="c.txt"),
    ]
    with pytest.raises(StaleWrite) as info:
        commit(roots, writes, journal_root=tmp_path / "j")
    assert info.value.details["paths"] == ["b.txt", "c.txt (it now exists)"]
    assert a.read_text() == "a0\n"
    assert not (tmp_path / "j").exists()


async def test_file_changed_after_planning_is_stale(
    apply: Apply, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("two\n")
    real_plan = plan_changes

    def plan_then_edit(*args: Any) -> Any:
        planned = real_plan(*args)
        (ws / "b.txt").write_text("edited by someone else\n")
        return planned

    monkeypatch.setattr(engine, "_plan_changes", plan_then_edit)
    with pytest.raises(AirlockError) as info:
        await apply(
            patch(
                "*** Update File: a.txt",
                "@@",
                "-one",
                "+1",
                "*** Update File: b.txt",
                "@@",
                "-two",
                "+2",
            )
        )
    assert info.value.code == "stale_write"
    assert "b.txt" in info.value.message
    assert (ws / "a.txt").read_text() == "one\n"
    assert (ws / "b.txt").read_text() == "edited by someone else\n"


async def test_success_leaves_no_journal(apply: Apply, ws: Path, workspace: Workspace) -> None:
    (ws / "a.txt").write_text("x\n")
    await apply(patch("*** Update File: a.txt", "*** Move to: d/e/a.txt", "@@", "-x", "+y"))
    assert _journals(workspace) == []
    assert snapshot(ws) == {"d": None, "d/e": None, "d/e/a.txt": b"y\n"}


# ---------------------------------------------------------------- journal replay


async def test_recovery_rolls_a_half_applied_patch_back(ws: Path, workspace: Workspace) -> None:
    (ws / "upd.txt").write_text("u0\n")
    (ws / "del.txt").write_text("d0\n")
    (ws / "untouched.txt").write_text("t0\n")
    os.chmod(ws / "del.txt", 0o640)
    roots = workspace.ctx.roots
    writes = [
        PlannedWrite(
            _at(roots, "new/deep/add.txt"), before=None, after=b"a1\n", display="new/deep/add.txt"
        ),
        PlannedWrite(
            _at(roots, "upd.txt"), before=b"u0\n", after=b"u1\n", display="upd.txt", mode=0o644
        ),
        PlannedWrite(
            _at(roots, "del.txt"), before=b"d0\n", after=None, display="del.txt", mode=0o640
        ),
        PlannedWrite(
            _at(roots, "untouched.txt"), before=b"t0\n", after=b"t1\n", display="untouched.txt"
        ),
    ]
    root = journal_root(workspace.config.state, workspace.ctx.roots.workspace)
    journal = Journal.begin(
        root,
        writes,
        created_dirs=[str(ws / "new"), str(ws / "new/deep")],
        allowed_roots=[ws],
    )
    for w in writes[:3]:  # "killed" before the fourth write, with a temp file lying around
        apply_one(roots, w)
    os.close(journal.lock_fd)  # the writer dies: the kernel drops its lock
    (ws / f"{TEMP_MARKER}0123456789ab-untouched.txt").write_bytes(b"t1")
    assert not (ws / "del.txt").exists()
    await workspace.startup()
    assert snapshot(ws) == {"upd.txt": b"u0\n", "del.txt": b"d0\n", "untouched.txt": b"t0\n"}
    assert (ws / "del.txt").stat().st_mode & 0o777 == 0o640
    assert _journals(workspace) == []


def _journaled_pair(ws: Path, workspace: Workspace) -> tuple[list[PlannedWrite], Journal]:
    """``a.txt`` and ``b.txt`` (a0, b0) about to become a1, b1, with the journal begun."""
    (ws / "a.txt").write_text("a0\n")
    (ws / "b.txt").write_text("b0\n")
    roots = workspace.ctx.roots
    writes = [
        PlannedWrite(_at(roots, "a.txt"), before=b"a0\n", after=b"a1\n", display="a.txt"),
        PlannedWrite(_at(roots, "b.txt"), before=b"b0\n", after=b"b1\n", display="b.txt"),
    ]
    root = journal_root(workspace.config.state, roots.workspace)
    return writes, Journal.begin(root, writes, created_dirs=[], allowed_roots=[ws])


async def test_recovery_leaves_files_changed_since_the_crash(
    ws: Path, workspace: Workspace
) -> None:
    roots = workspace.ctx.roots
    writes, journal = _journaled_pair(ws, workspace)
    for w in writes:
        apply_one(roots, w)
    os.close(journal.lock_fd)
    (ws / "a.txt").write_text("edited after the crash\n")
    await workspace.startup()
    assert (ws / "a.txt").read_text() == "edited after the crash\n"
    assert (ws / "b.txt").read_text() == "b0\n"


async def test_recovery_refuses_targets_outside_the_roots(
    ws: Path, workspace: Workspace, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("mine\n")
    root = journal_root(workspace.config.state, workspace.ctx.roots.workspace)
    directory = root / "forged"
    directory.mkdir(parents=True)
    (directory / "before-0").write_bytes(b"evil\n")
    import hashlib
    import json

    (directory / MANIFEST).write_text(
        json.dumps(
            {
                "version": 1,
                "full": True,
                "entries": [
                    {
                        "target": str(outside),
                        "display": "x",
                        "before": "before-0",
                        "before_sha256": hashlib.sha256(b"evil\n").hexdigest(),
                        "after_sha256": hashlib.sha256(b"mine\n").hexdigest(),
                        "mode": 0o644,
                    }
                ],
                "created_dirs": [],
                "roots": [],
            }
        )
    )
    await workspace.startup()
    assert outside.read_text() == "mine\n"
    # A journal that cannot be verified against the running roots is left (and logged).
    assert _journals(workspace) == [directory]


# ---------------------------------------------------------------- serialisation


async def test_patches_on_one_root_are_serialised_and_reads_still_answer(
    apply: Apply, ws: Path, workspace: Workspace
) -> None:
    (ws / "a.txt").write_text("one\ntwo\n")
    root = str(workspace.ctx.roots.workspace)
    locks = workspace.ctx.root_locks
    async with locks.hold([root]):
        first = asyncio.create_task(apply(patch("*** Update File: a.txt", "@@", "-one", "+1")))
        second = asyncio.create_task(apply(patch("*** Update File: a.txt", "@@", "-two", "+2")))
        # Both patches queue on the root lock this test holds (its third user).
        await wait_until(lambda: locks._users.get(root) == 3, message="the patches never queued")
        assert not first.done() and not second.done()  # waiting for the root
        read = await workspace.call("file_read", {"path": "a.txt"})
        assert read.model_dump()["content"] == "one\ntwo\n"
    await asyncio.gather(first, second)
    assert (ws / "a.txt").read_text() == "1\n2\n"


async def test_recovery_skips_a_journal_held_by_a_live_writer(
    ws: Path, workspace: Workspace
) -> None:
    roots = workspace.ctx.roots
    writes, journal = _journaled_pair(ws, workspace)
    apply_one(roots, writes[0])  # another daemon is mid-patch
    await workspace.startup()
    assert (ws / "a.txt").read_text() == "a1\n"
    assert _journals(workspace) == [journal.directory]
    apply_one(roots, writes[1])
    journal.close()
    assert _journals(workspace) == []
    assert (ws / "b.txt").read_text() == "b1\n"


async def test_symlink_swapped_in_after_planning_is_refused(
    apply: Apply, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "sub").mkdir()
    (ws / "keep.txt").write_text("k\n")
    real_plan = plan_changes

    def plan_then_swap(*args: Any) -> Any:
        planned = real_plan(*args)
        (ws / "sub").rmdir()
        os.symlink(outside, ws / "sub")
        return planned

    monkeypatch.setattr(engine, "_plan_changes", plan_then_swap)
    with pytest.raises(AirlockError) as info:
        await apply(
            patch("*** Update File: keep.txt", "@@", "-k", "+K", "*** Add File: sub/new.txt", "+x")
        )
    assert info.value.code == "path_escape"
    assert list(outside.iterdir()) == []
    assert (ws / "keep.txt").read_text() == "k\n"


def test_unwritable_journal_writes_nothing(tmp_path: Path) -> None:
    a = tmp_path / "a.txt"
    a.write_text("a0\n")
    blocker = tmp_path / "state-is-a-file"
    blocker.write_text("")
    roots = Roots(workspace=tmp_path)
    writes = [PlannedWrite(_at(roots, "a.txt"), before=b"a0\n", after=b"a1\n", display="a.txt")]
    with pytest.raises(AirlockError) as info:
        commit(roots, writes, journal_root=blocker / "j")
    assert info.value.code == "internal" and "nothing was written" in info.value.message
    assert a.read_text() == "a0\n"


async def test_damaged_journal_never_stops_start_up(ws: Path, workspace: Workspace) -> None:
    root = journal_root(workspace.config.state, workspace.ctx.roots.workspace)
    damaged = root / "damaged"
    damaged.mkdir(parents=True)
    (damaged / MANIFEST).write_text('{"version": 1, "full": true, "entries": [{"no": "target"}]}')
    await workspace.startup()
    assert (damaged / MANIFEST).exists()  # left for inspection
