"""exec's stdin inside the timeout, and spills that cannot fill the disk."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from airlock.daemon.context import DaemonConfig
from airlock.daemon.procs.spill import SpillStore
from airlock.daemon.protocol import ExecExitEvent, ExecInput
from airlock.daemon.workspace import Workspace
from tests.fakes.daemon_harness import running_daemon

HUGE_STDIN = "x" * (4 * 1024 * 1024)  # far beyond a pipe buffer, within the body limit


async def test_stdin_that_is_never_read_still_times_out(workspace_dir: Path) -> None:
    """``sleep`` never reads stdin: writing 4 MiB blocks, and the timeout must still fire."""
    async with running_daemon(workspace_dir) as daemon, daemon.client() as client:
        out = await client.exec(argv=["sleep", "60"], stdin=HUGE_STDIN, timeout_s=1)
        assert out.timed_out is True and out.signal == 9
        events = [
            e async for e in client.exec_stream(argv=["sleep", "60"], stdin=HUGE_STDIN, timeout_s=1)
        ]
        last = events[-1]
        assert isinstance(last, ExecExitEvent) and last.timed_out is True


async def test_stdin_is_delivered_when_read(in_process: Workspace) -> None:
    script = "import sys; print(len(sys.stdin.read()))"
    out = await in_process.exec(ExecInput(argv=[sys.executable, "-c", script], stdin=HUGE_STDIN))
    assert out.stdout == f"{len(HUGE_STDIN)}\n" and out.exit_code == 0


@pytest.fixture
async def small_limits(workspace_dir: Path, tmp_path: Path) -> AsyncIterator[Workspace]:
    ws = Workspace(
        DaemonConfig(
            workspace=workspace_dir,
            artifacts_dir=tmp_path / "artifacts",
            state_dir=tmp_path / "state",
            exec_spill_max_bytes=1024 * 1024,
            artifacts_quota_bytes=3 * 1024 * 1024,
        )
    )
    yield ws
    await ws.aclose()


async def test_spill_is_capped_per_exec(small_limits: Workspace) -> None:
    script = "import sys; sys.stdout.buffer.write(b'y' * (8 << 20)); sys.stderr.buffer.write(b'e' * (8 << 20))"
    out = await small_limits.exec(
        ExecInput(argv=[sys.executable, "-c", script], max_output_bytes=1000)
    )
    assert out.stdout_truncated and out.stderr_truncated and out.spill_path
    spills = sorted(Path(out.spill_path).parent.glob("exec-*"))
    # stdout and stderr together stay within the per-exec cap.
    assert sum(p.stat().st_size for p in spills) == 1024 * 1024
    assert Path(out.spill_path).read_bytes() == b"y" * (1024 * 1024)


async def test_quota_removes_the_oldest_spills_first(small_limits: Workspace) -> None:
    script = "import sys; sys.stdout.buffer.write(b'z' * (2 << 20))"
    paths = []
    for _ in range(6):
        out = await small_limits.exec(
            ExecInput(argv=[sys.executable, "-c", script], max_output_bytes=1000)
        )
        assert out.spill_path is not None
        paths.append(Path(out.spill_path))
    artifacts = paths[0].parent
    total = sum(p.stat().st_size for p in artifacts.glob("exec-*"))
    assert total <= 3 * 1024 * 1024 + 1024 * 1024  # quota, plus the one being written
    assert paths[-1].exists(), "the newest spill must survive"
    assert not paths[0].exists(), "the oldest spill goes first"
    kept = [p.exists() for p in paths]
    assert kept == sorted(kept), "spills are removed oldest first"


def test_make_room_never_removes_a_spill_being_written(tmp_path: Path) -> None:
    store = SpillStore(tmp_path, per_exec_cap=10, quota=10)
    busy = tmp_path / "exec-1.stdout"
    busy.write_bytes(b"a" * 100)
    old = tmp_path / "exec-0.stdout"
    old.write_bytes(b"b" * 100)
    other = tmp_path / "notes.txt"
    other.write_bytes(b"c" * 100)
    store.writing.add(busy)
    store.make_room(0)
    assert busy.exists() and other.exists() and not old.exists()


async def test_spill_cap_flag(workspace_dir: Path) -> None:
    args = ["--exec-spill-max-bytes", "100000", "--artifacts-quota-bytes", "1000000"]
    async with running_daemon(workspace_dir, extra_args=args) as daemon, daemon.client() as c:
        script = "import sys; sys.stdout.buffer.write(b'q' * (1 << 20))"
        out = await c.exec(argv=[sys.executable, "-c", script], max_output_bytes=1000)
        assert out.spill_path is not None
        assert Path(out.spill_path).stat().st_size == 100000


def test_reservations_share_the_quota_and_spare_unreturned_spills(tmp_path: Path) -> None:
    store = SpillStore(tmp_path, per_exec_cap=100, quota=100)
    old = tmp_path / "exec-0.stdout"
    old.write_bytes(b"o" * 60)
    a, b = tmp_path / "exec-1.stdout", tmp_path / "exec-2.stdout"
    assert store.reserve(a, 70) == 70  # the old finished spill makes room
    assert not old.exists()
    assert store.reserve(b, 70) == 30  # what is left; a's reservation is not deletable
    a.write_bytes(b"a" * 70)
    store.settle(a, 70)
    assert store.reserve(b, 10) == 0 and a.exists()  # a's call has not returned yet
    store.release(a)
    assert store.reserve(b, 10) == 10 and not a.exists()
