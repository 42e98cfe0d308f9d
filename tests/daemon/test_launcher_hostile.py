"""The engine launcher's second line: a launcher that is no longer ours.

The launcher runs as the exec user, so the agent may kill it, and in the moment before it
makes itself non-dumpable, a process of the same user could even take it over. Whatever
then answers on the daemon's socket is treated as the agent's words. These tests play
that launcher over a real ``SOCK_SEQPACKET`` socketpair and check what the daemon does:
a pid that is not the exec user's is refused, a pid already gone is never signalled, a
flood of exit records is bounded, and descriptors sent back to the daemon are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import socket
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from airlock.daemon.identity import ExecUser
from airlock.daemon.procs.launcher import Launched, Launcher, LauncherUnavailable


@dataclass
class Hostile:
    """The test's end of the socket: it reads the daemon's requests and answers as it likes."""

    sock: socket.socket

    async def request(self) -> dict[str, Any]:
        msg, fds, _flags, _addr = await asyncio.to_thread(socket.recv_fds, self.sock, 1 << 16, 16)
        for fd in fds:
            os.close(fd)
        header: dict[str, Any] = json.loads(msg)
        return header

    def send(self, record: dict[str, Any], fds: list[int] | None = None) -> None:
        socket.send_fds(self.sock, [json.dumps(record).encode()], fds or [])


def _someone_else() -> ExecUser:
    """An exec user that is not the one running the test (so the test's own pids are foreign)."""
    entry = pwd.getpwnam("nobody") if os.getuid() != pwd.getpwnam("nobody").pw_uid else None
    if entry is None:  # pragma: no cover - the suite does not run as nobody
        pytest.skip("runs as nobody: no other user to stand for the exec user; did NOT run")
    return ExecUser(entry.pw_name, entry.pw_uid, entry.pw_gid, (), entry.pw_dir)


@dataclass
class TakenOver:
    launcher: Launcher
    hostile: Hostile
    ready: asyncio.Future[int]
    """Settles when the daemon has read every record sent before a ``ready`` one."""

    async def settled(self) -> None:
        """Send a ``ready`` record and wait until the daemon has read up to it (records on
        a ``SOCK_SEQPACKET`` socket arrive in order), or dropped the launcher before."""
        self.hostile.send({"ready": 1})
        with contextlib.suppress(LauncherUnavailable):
            await asyncio.wait_for(asyncio.shield(self.ready), 10)


@pytest.fixture
async def taken_over() -> AsyncIterator[TakenOver]:
    launcher = Launcher(_someone_else(), asyncio.get_running_loop())
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    state = TakenOver(launcher, Hostile(theirs), launcher._attach(ours, None))
    try:
        yield state
    finally:
        launcher.close()
        state.hostile.sock.close()
        if state.ready.done() and not state.ready.cancelled():
            state.ready.exception()  # retrieved: a dropped launcher's ready is its error


def _spawn(launcher: Launcher) -> asyncio.Task[Launched]:
    return asyncio.create_task(
        launcher.spawn(["rg", "x"], cwd="/", env=None, pass_fds=[], new_session=True)
    )


@pytest.mark.parametrize("who", ["init", "the daemon", "another user's program"])
async def test_a_pid_that_is_not_the_exec_users_is_refused(taken_over: TakenOver, who: str) -> None:
    launcher, hostile = taken_over.launcher, taken_over.hostile
    with subprocess.Popen(["sleep", "30"]) as mine:  # runs as the test's user, not the exec user
        pid = {"init": 1, "the daemon": os.getpid(), "another user's program": mine.pid}[who]
        task = _spawn(launcher)
        header = await hostile.request()
        hostile.send({"id": header["id"], "pid": pid})
        with pytest.raises(LauncherUnavailable, match="foreign pid"):
            await task
        assert not launcher.alive, "a lying launcher must be dropped"
        assert mine.poll() is None, "the daemon signalled a program that is not the exec user's"
        mine.kill()


async def test_a_pid_already_gone_is_never_signalled(taken_over: TakenOver) -> None:
    launcher, hostile = taken_over.launcher, taken_over.hostile
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its number is free for anyone's next process
    task = _spawn(launcher)
    header = await hostile.request()
    hostile.send({"id": header["id"], "pid": gone.pid})
    child = await task
    assert child.signalable is False
    hostile.send({"exit": gone.pid, "status": 0})
    assert await child.wait() == 0


async def test_a_flood_of_exits_for_unknown_programs_drops_the_launcher(
    taken_over: TakenOver,
) -> None:
    launcher, hostile = taken_over.launcher, taken_over.hostile
    base = 4_000_000  # above pid_max: no program the daemon could be waiting for

    def flood() -> None:
        with contextlib.suppress(OSError):  # the daemon closes its end once it has had enough
            for n in range(300):
                hostile.send({"exit": base + n, "status": 0})

    await asyncio.to_thread(flood)
    with contextlib.suppress(OSError):
        await taken_over.settled()
    assert not launcher.alive, "300 unasked exits must end the launcher, not grow the daemon"
    assert len(launcher._early) == 0


async def test_descriptors_sent_to_the_daemon_are_dropped(taken_over: TakenOver) -> None:
    launcher, hostile = taken_over.launcher, taken_over.hostile
    before = len(os.listdir("/proc/self/fd"))
    r, w = os.pipe()
    try:

        def send_with_descriptors() -> None:
            for _ in range(50):
                hostile.send({"exit": 4_100_000, "status": 0}, [r, w])

        await asyncio.to_thread(send_with_descriptors)
        await taken_over.settled()
        assert launcher.alive and taken_over.ready.done()
    finally:
        os.close(r)
        os.close(w)
    assert len(os.listdir("/proc/self/fd")) <= before, "the daemon kept descriptors it was sent"
