"""``process_write`` to a process that never reads: ``conflict`` at 1 MiB, not daemon memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.daemon.errors import AirlockError
from airlock.daemon.procs.table import STDIN_QUEUE_BYTES
from tests.daemon.adversarial.as_exec_user import daemon_as_root, needs_root, status_field

pytestmark = [needs_root]

HALF = "x" * (STDIN_QUEUE_BYTES // 2)
BIG = "\u20ac" * 1_000_000  # 3 MB once encoded: the largest write a call may carry


def rss_kib(pid: int) -> int:
    return int(status_field(pid, "VmRSS").split()[0])


async def test_stdin_of_a_process_that_never_reads_is_bounded() -> None:
    async with daemon_as_root() as (d, c):
        started = await c.process_start(argv=["sleep", "300"])
        # The pipe takes its 64 KiB, the queue the rest: both halves fit, a third does not.
        assert (await c.process_write(id=started.id, data=HALF)).written == len(HALF)
        assert (await c.process_write(id=started.id, data=HALF)).written == len(HALF)
        with pytest.raises(AirlockError) as refused:
            await c.process_write(id=started.id, data=HALF)
        assert refused.value.code == "conflict"
        assert "has not read" in refused.value.message
        assert refused.value.details["limit"] == STDIN_QUEUE_BYTES
        before = 0
        for i in range(25):
            if i == 5:  # after the allocator has grown to serve 6 MB request bodies
                before = rss_kib(d.process.pid)
            with pytest.raises(AirlockError) as again:
                await c.process_write(id=started.id, data=BIG)
            assert again.value.code == "conflict"
        grown_mib = (rss_kib(d.process.pid) - before) / 1024
        # 20 such writes queued would hold 60 MB.
        assert grown_mib < 16, f"daemon RSS grew by {grown_mib:.0f} MiB"
        await c.process_kill(id=started.id, signal="KILL")
        assert Path(f"/proc/{d.process.pid}").exists()


async def test_a_large_write_to_a_reader_goes_through() -> None:
    """One 3 MB write is larger than the queue: it goes in slices as the process reads."""
    async with daemon_as_root() as (d, c):
        started = await c.process_start(argv=["sh", "-c", "wc -c > count"])
        out = await c.process_write(id=started.id, data=BIG, eof=True)
        assert out.written == len(BIG.encode()) and out.stdin_open is False
        read = await c.process_read(id=started.id, wait_ms=10_000)
        while read.running:
            read = await c.process_read(id=started.id, offset=read.next_offset, wait_ms=10_000)
        assert (d.workspace / "count").read_text().strip() == str(len(BIG.encode()))
