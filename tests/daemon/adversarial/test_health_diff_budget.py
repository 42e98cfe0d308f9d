"""The event loop stays free: /v1/health answers while a quadratic-prone diff runs, and the
diff degrades to a summary past its budget instead of running for minutes.

Not a performance assertion: health only has to answer within a generous bound
(bench/bench_health.py measures the p99).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from airlock.client.daemon import DaemonClient
from tests.fakes.daemon_harness import running_daemon
from tests.fakes.wait import pace, wait_until

LINES = 20_000
# 500 distinct lines, each 40 times: no line is unique (no anchor), none is popular enough
# for difflib's junk heuristic: the matcher's worst case.
OLD = "".join(f"value = {i % 500}\n" for i in range(LINES))
NEW = "".join(f"value = {(i * 7) % 500}\n" for i in range(LINES))
LIVENESS_S = 10.0


async def poll_health(socket: Path, stop: asyncio.Event, answered: list[float]) -> None:
    async with DaemonClient(socket=str(socket)) as c:
        while not stop.is_set():
            started = time.monotonic()
            health = await asyncio.wait_for(c.health(), LIVENESS_S)
            assert health.status == "ok"
            answered.append(time.monotonic() - started)
            await pace(0.02)


async def test_health_answers_while_a_20k_line_diff_runs_and_it_degrades(
    workspace_dir: Path,
) -> None:
    (workspace_dir / "big.txt").write_text(OLD)
    async with running_daemon(workspace_dir) as d, d.client() as c:
        stop = asyncio.Event()
        answered: list[float] = []
        poller = asyncio.create_task(poll_health(d.socket, stop, answered))
        try:
            await wait_until(lambda: answered, message="health never answered")
            before = len(answered)
            preview = await c.call(
                "file_diff_preview",
                {"edits": [{"path": "big.txt", "old_string": OLD, "new_string": NEW}]},
            )
            during = len(answered) - before
        finally:
            stop.set()
            await poller  # re-raises a health call that failed or hung
        diff = preview["files"][0]["diff"]
        assert diff.startswith(f"file rewritten, {LINES} lines (was {LINES})"), diff[:200]
        assert "read the file" in diff
        assert during >= 2, f"health answered {during} times while the diff ran"
        assert (workspace_dir / "big.txt").read_text() == OLD  # a preview writes nothing
        # The editing tools' own diffs degrade the same way, and the edit itself is whole.
        written = await c.file_write(path="big.txt", content=NEW)
        assert written.diff.startswith(f"file rewritten, {LINES} lines")
        assert (workspace_dir / "big.txt").read_text() == NEW
        # An ordinary edit of a large file of distinct lines still gets a real unified diff.
        (workspace_dir / "code.txt").write_text("".join(f"x{i} = {i}\n" for i in range(LINES)))
        patched = await c.file_patch(
            path="code.txt", old_string="x777 = 777\n", new_string="x777 = -1\n"
        )
        assert patched.diff.startswith("--- a/code.txt\n+++ b/code.txt\n@@ -775,7 +775,7 @@\n")
        assert "-x777 = 777\n+x777 = -1\n" in patched.diff
