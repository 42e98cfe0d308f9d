"""No process an ``exec`` started outlives it: hostile commands against a real airlockd.

Each command below tries a different way out of its process group (``setsid``,
``setpgid``, double fork, closing its pipes, a burst of forks) and writes the
pids of its escapees to a file; after the call returns, every one of them
must be gone, and airlockd (a subreaper) must not keep them as zombies.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from airlock.client.daemon import DaemonClient
from airlock.daemon.procs.tree import alive, read_stat, scan
from airlock.daemon.protocol import ExecOutputEvent
from tests.fakes.daemon_harness import RunningDaemon, running_daemon

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningDaemon]:
    workspace = tmp_path_factory.mktemp("survivors") / "ws"
    workspace.mkdir()
    async with running_daemon(workspace) as d:
        yield d


@pytest_asyncio.fixture(loop_scope="module")
async def client(daemon: RunningDaemon) -> AsyncIterator[DaemonClient]:
    async with daemon.client() as c:
        yield c


# Writes its pid to PIDFILE (appending), then sleeps; the escape happens before.
PRELUDE = """
import os, sys, time
PIDFILE = sys.argv[1]
def note():
    with open(PIDFILE, "a") as f:
        f.write(f"{os.getpid()}\\n")
def detach_stdio():
    fd = os.open(os.devnull, os.O_RDWR)
    for n in (0, 1, 2):
        os.dup2(fd, n)
"""

ESCAPES = {
    "double_fork_setsid_quiet": """
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        detach_stdio(); note(); time.sleep(300)
    os._exit(0)
time.sleep(0.3)
""",
    "double_fork_setsid_holding_pipes": """
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        note(); time.sleep(300)
    os._exit(0)
time.sleep(0.3)
""",
    "setpgid_child": """
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0); detach_stdio(); note(); time.sleep(300)
time.sleep(0.3)
""",
    "instant_double_fork_no_wait": """
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        detach_stdio(); note(); time.sleep(300)
    os._exit(0)
while not os.path.exists(PIDFILE):
    time.sleep(0.001)
""",
    "scrubbed_env_exec_after_tracking": """
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        detach_stdio(); note(); os.execve("/bin/sleep", ["sleep", "300"], {})
    time.sleep(0.5)
    os._exit(0)
time.sleep(0.5)
""",
    "fork_burst": """
for _ in range(20):
    if os.fork() == 0:
        os.setsid(); detach_stdio()
        if os.fork() == 0:
            note(); time.sleep(300)
        os._exit(0)
time.sleep(0.5)
""",
}


async def pids_in(path: Path, at_least: int) -> list[int]:
    for _ in range(400):
        if path.exists():
            pids = [int(x) for x in path.read_text().split()]
            if len(pids) >= at_least:
                return pids
        await asyncio.sleep(0.05)
    return [int(x) for x in path.read_text().split()] if path.exists() else []


async def wait_gone(pids: list[int]) -> list[int]:
    for _ in range(400):
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        await asyncio.sleep(0.05)
    return [p for p in pids if alive(p)]


async def zombies_of(pid: int) -> list[int]:
    """The daemon's zombie children left once its sweeper had time to reap (generous deadline)."""
    for _ in range(400):
        zombies = [p.pid for p in scan().values() if p.ppid == pid and p.state == "Z"]
        if not zombies:
            return []
        await asyncio.sleep(0.05)
    return zombies


@pytest.mark.parametrize("name", sorted(ESCAPES))
async def test_exec_leaves_nothing_alive(
    name: str, client: DaemonClient, daemon: RunningDaemon, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pids"
    script = PRELUDE + ESCAPES[name]
    out = await client.exec(argv=[sys.executable, "-c", script, str(pidfile)], timeout_s=60)
    assert out.timed_out is False
    expected = 20 if name == "fork_burst" else 1
    pids = await pids_in(pidfile, expected)
    assert len(pids) == expected, pidfile.read_text() if pidfile.exists() else "no pids"
    assert await wait_gone(pids) == [], f"{name}: survivors"
    assert await zombies_of(daemon.process.pid) == [], "airlockd left zombies behind"


async def test_timeout_takes_setsid_grandchildren_too(client: DaemonClient, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    script = PRELUDE + ESCAPES["double_fork_setsid_quiet"] + "\ntime.sleep(300)\n"
    out = await client.exec(argv=[sys.executable, "-c", script, str(pidfile)], timeout_s=2)
    assert out.timed_out is True
    pids = await pids_in(pidfile, 1)
    assert pids and await wait_gone(pids) == []


async def test_stream_disconnect_takes_setsid_grandchildren(
    client: DaemonClient, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pids"
    script = (
        PRELUDE
        + ESCAPES["double_fork_setsid_quiet"]
        + "\nprint('ready', flush=True)\ntime.sleep(300)\n"
    )
    argv = [sys.executable, "-c", script, str(pidfile)]
    stream = client.exec_stream(argv=argv)
    assert isinstance(stream, AsyncGenerator)  # aclosing() needs its aclose()
    async with contextlib.aclosing(stream) as events:
        async for event in events:
            if isinstance(event, ExecOutputEvent) and "ready" in event.data:
                break
    await client.aclose()
    pids = await pids_in(pidfile, 1)
    assert pids and await wait_gone(pids) == []


async def test_background_processes_are_exempt(client: DaemonClient, tmp_path: Path) -> None:
    """An exec's sweep never touches what process_start runs (a dev server must survive)."""
    started = await client.process_start(argv=["sleep", "300"])
    out = await client.exec(argv=["sh", "-c", "sleep 0.2 & echo done"])
    assert out.stdout == "done\n"
    assert alive(started.pid)
    info = read_stat(started.pid)
    assert info is not None
    await client.process_kill(id=started.id, signal="KILL")


async def test_a_fork_storm_at_timeout_is_swept_whole(client: DaemonClient, tmp_path: Path) -> None:
    """Every member keeps forking setsid'd grandchildren while the sweep runs; none survives."""
    pidfile = tmp_path / "pids"
    storm = """
for _ in range(150):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            detach_stdio(); note()
            for _ in range(3):
                if os.fork() == 0:
                    note(); time.sleep(300)
                time.sleep(0.05)
            time.sleep(300)
        os._exit(0)
    time.sleep(0.01)
time.sleep(300)
"""
    out = await client.exec(argv=[sys.executable, "-c", PRELUDE + storm, str(pidfile)], timeout_s=2)
    assert out.timed_out is True
    pids = await pids_in(pidfile, 10)
    assert len(pids) >= 10
    assert await wait_gone(pids) == []
    everyone = [int(x) for x in pidfile.read_text().split()]  # late notes included
    assert await wait_gone(everyone) == []
