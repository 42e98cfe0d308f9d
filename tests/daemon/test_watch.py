"""``POST /v1/watch`` over a real airlockd: event types, filters, confinement, floods, cleanup.

Changes are made by the test itself (root) or by the agent's own process
(``exec``, as the exec user); the watch must report the former and the latter
alike, never anything outside the workspace, and free its inotify descriptor
when the client goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from pathlib import Path

import pytest

from airlock.client.daemon import DaemonClient, DaemonUnavailable, InvalidRequest, PathEscape
from airlock.client.transfer import WatchStream
from airlock.daemon.protocol import WatchEvent
from tests.fakes.agent_daemon import CHILD_PYTHON, AgentDaemon
from tests.fakes.wait import wait_until

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def client(agent_client: DaemonClient) -> DaemonClient:
    return agent_client


class Seen:
    """Collects a stream's events in the background."""

    def __init__(self, stream: WatchStream) -> None:
        self.events: list[WatchEvent] = []
        self._task = asyncio.ensure_future(self._run(stream))

    async def _run(self, stream: WatchStream) -> None:
        with contextlib.suppress(DaemonUnavailable):  # the test closed it
            async for event in stream:
                self.events.append(event)

    def tuples(self) -> list[tuple[str, str | None, str | None, bool | None]]:
        return [(e.type, e.path, e.to, e.is_dir) for e in self.events]

    async def until(self, *wanted: tuple[str, str | None, str | None, bool | None]) -> None:
        await wait_until(
            lambda: all(w in self.tuples() for w in wanted),
            timeout=15,
            message=f"never saw {wanted}",
        )

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def inotify_fds(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify":
                count += 1
        except OSError:
            continue
    return count


async def test_every_event_type_with_relative_paths(
    agent: AgentDaemon, client: DaemonClient
) -> None:
    ws = agent.workspace
    (ws / "ev").mkdir()
    os.chown(ws / "ev", agent.exec_uid or -1, agent.exec_gid or -1)
    (ws / "ev" / "old.txt").write_text("old")
    (ws / "ev" / "gone.txt").write_text("gone")
    async with client.watch(["ev"]) as stream:
        seen = Seen(stream)
        (ws / "ev" / "new.txt").write_text("new")
        (ws / "ev" / "dir").mkdir()
        await seen.until(("created", "ev/new.txt", None, False), ("created", "ev/dir", None, True))
        with (ws / "ev" / "old.txt").open("a") as f:
            f.write("more")
        (ws / "ev" / "gone.txt").unlink()
        (ws / "ev" / "new.txt").rename(ws / "ev" / "dir" / "moved.txt")
        await seen.until(
            ("modified", "ev/old.txt", None, False),
            ("deleted", "ev/gone.txt", None, False),
            ("moved", "ev/new.txt", "ev/dir/moved.txt", False),
        )
        # A directory moved inside the tree keeps being watched at its new place.
        (ws / "ev" / "dir").rename(ws / "ev" / "dir2")
        await seen.until(("moved", "ev/dir", "ev/dir2", True))
        (ws / "ev" / "dir2" / "late.txt").write_text("late")
        await seen.until(("created", "ev/dir2/late.txt", None, False))
        # A tree made at once: whatever appeared before its watch was added is reported too.
        (ws / "ev" / "n1" / "n2").mkdir(parents=True)
        (ws / "ev" / "n1" / "n2" / "f.txt").write_text("f")
        await seen.until(
            ("created", "ev/n1", None, True),
            ("created", "ev/n1/n2", None, True),
            ("created", "ev/n1/n2/f.txt", None, False),
        )
        # The agent's own process (the exec user) is seen the same way; a burst of
        # appends within 50 ms is one event, not one per write.
        result = await client.exec(
            argv=[
                CHILD_PYTHON,
                "-c",
                "f = open('ev/burst.txt', 'w')\n"
                "for i in range(50):\n    f.write('x'); f.flush()\nf.close()",
            ]
        )
        assert result.exit_code == 0, result.stderr
        await seen.until(("created", "ev/burst.txt", None, False))
        await seen.stop()
    burst = [e for e in seen.events if e.path == "ev/burst.txt"]
    assert len(burst) <= 2, burst  # created (and at most one modified in a later window)


async def test_globs_ignore_files_and_symlinks_out(
    agent: AgentDaemon, client: DaemonClient, tmp_path: Path
) -> None:
    ws = agent.workspace
    root = ws / "flt"
    (root / "build").mkdir(parents=True)
    (root / "ignored").mkdir()
    (root / ".gitignore").write_text("ignored/\n*.tmp\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "out").symlink_to(outside)
    async with client.watch(
        ["flt"], include=["*.py", "*.tmp", "**/keep/*"], exclude=["build/**", "flt/build/**"]
    ) as stream:
        seen = Seen(stream)
        (outside / "secret.py").write_text("outside")
        (root / "build" / "gen.py").write_text("excluded")
        (root / "ignored" / "x.py").write_text("ignored by .gitignore")
        (root / "scratch.tmp").write_text("ignored by .gitignore")
        (root / "notes.txt").write_text("not included")
        (root / "main.py").write_text("reported")
        await seen.until(("created", "flt/main.py", None, False))
        await seen.stop()
    paths = {e.path for e in seen.events}
    assert paths == {"flt/main.py"}, seen.tuples()

    async with client.watch(["flt"], ignore_files=False, include=["*.tmp"]) as stream:
        seen = Seen(stream)
        (root / "again.tmp").write_text("now reported")
        await seen.until(("created", "flt/again.tmp", None, False))
        await seen.stop()


async def test_refusals_and_read_scope(agent: AgentDaemon) -> None:
    (agent.workspace / "afile").write_text("x")
    async with agent.reader() as reader:
        with pytest.raises(PathEscape):
            await reader.watch(["../"]).open()
        with pytest.raises(InvalidRequest):
            await reader.watch(["afile"]).open()
        async with reader.watch(["."], include=["read-scope.txt"]) as stream:
            seen = Seen(stream)
            (agent.workspace / "read-scope.txt").write_text("x")
            await seen.until(("created", "read-scope.txt", None, False))
            await seen.stop()


async def test_closing_the_stream_frees_the_inotify_descriptor(agent: AgentDaemon) -> None:
    pid = agent.daemon.process.pid
    # The daemon holds no inotify descriptor but the watches' (earlier tests' have gone).
    await wait_until(lambda: inotify_fds(pid) == 0, timeout=10, message="earlier watches kept")
    baseline = 0
    async with agent.reader() as reader:
        stream = await reader.watch(["."]).open()
        assert inotify_fds(pid) == baseline + 1
        await stream.aclose()
    await wait_until(lambda: inotify_fds(pid) == baseline, timeout=10, message="inotify fd kept")


async def test_a_flood_gives_one_overflow_and_the_stream_goes_on(
    agent: AgentDaemon, client: DaemonClient
) -> None:
    """100k creations while the daemon cannot read (SIGSTOP): the kernel's queue (16384
    events by default) must overflow, whatever the machine's speed; after SIGCONT the
    client gets one ``overflow`` and then the events of later changes."""
    ws = agent.workspace
    flood = ws / "flood"
    flood.mkdir()
    pid = agent.daemon.process.pid
    async with client.watch(["flood"]) as stream:
        seen = Seen(stream)
        os.kill(pid, signal.SIGSTOP)
        try:
            for i in range(100_000):
                os.close(os.open(flood / f"f{i}", os.O_CREAT | os.O_WRONLY, 0o644))
        finally:
            os.kill(pid, signal.SIGCONT)
        await wait_until(lambda: any(e.type == "overflow" for e in seen.events), timeout=30)

        async def sentinel_seen() -> bool:
            # Written again on every poll (wait_until paces them): any one event will do.
            (flood / "sentinel").write_text(str(len(seen.events)))
            return any(e.path == "flood/sentinel" for e in seen.events)

        await wait_until(sentinel_seen, timeout=30, message="the stream stopped after the flood")
        await seen.stop()
    overflows = [e for e in seen.events if e.type == "overflow"]
    assert len(overflows) == 1, f"{len(overflows)} overflow events for one flood"
    shutil.rmtree(flood)
