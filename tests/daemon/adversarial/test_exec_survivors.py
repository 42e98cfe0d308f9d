"""No process an ``exec`` started outlives it: hostile commands against a real airlockd.

Each command below tries a different way out of its process group (``setsid``,
``setpgid``, double fork, closing its pipes, a burst of forks) and writes the
pids of its escapees to a file; after the call returns, every one of them
must be gone, and airlockd (a subreaper) must not keep them as zombies.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from airlock.client.daemon import DaemonClient
from airlock.daemon.procs.tree import alive, read_stat, scan
from airlock.daemon.protocol import ExecOutputEvent
from tests.fakes.daemon_harness import RunningDaemon, daemon_in
from tests.fakes.wait import wait_until

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningDaemon]:
    async with daemon_in(tmp_path_factory.mktemp("survivors")) as d:
        yield d


@pytest_asyncio.fixture(loop_scope="module")
async def client(daemon: RunningDaemon) -> AsyncIterator[DaemonClient]:
    async with daemon.client() as c:
        yield c


# Writes its pid to PIDFILE (appending), then lingers until killed; the escape happens before.
PRELUDE = """
import os, signal, sys, time
PIDFILE = sys.argv[1]
def note():
    with open(PIDFILE, "a") as f:
        f.write(f"{os.getpid()}\\n")
def detach_stdio():
    fd = os.open(os.devnull, os.O_RDWR)
    for n in (0, 1, 2):
        os.dup2(fd, n)
def linger():
    while True:
        signal.pause()
def wait_for(condition):
    # A hostile program cannot import the tests' wait helper: the same poll, inline.
    while not condition():
        time.sleep(0.001)
def noted_pids():
    return [int(x) for x in open(PIDFILE).read().split()] if os.path.exists(PIDFILE) else []
def wait_noted(count=1):
    wait_for(lambda: len(noted_pids()) >= count)
def execed(pid, name):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip() == name
    except OSError:
        return True  # already gone: nothing left to wait for
"""

ESCAPES = {
    "double_fork_setsid_quiet": """
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        detach_stdio(); note(); linger()
    os._exit(0)
wait_noted()
""",
    "double_fork_setsid_holding_pipes": """
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        note(); linger()
    os._exit(0)
wait_noted()
""",
    "setpgid_child": """
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0); detach_stdio(); note(); linger()
wait_noted()
""",
    "scrubbed_env_exec_after_tracking": """
if os.fork() == 0:
    os.setsid()
    grandchild = os.fork()
    if grandchild == 0:
        detach_stdio(); note(); os.execve("/bin/sleep", ["sleep", "300"], {})
    wait_for(lambda: execed(grandchild, "sleep"))  # the exec lands while both parents run
    os._exit(0)
wait_noted()
wait_for(lambda: execed(noted_pids()[0], "sleep"))
""",
    "fork_burst": """
for _ in range(20):
    if os.fork() == 0:
        os.setsid(); detach_stdio()
        if os.fork() == 0:
            note(); linger()
        os._exit(0)
wait_noted(20)
""",
}


def _noted(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _zombies(pid: int) -> list[int]:
    return [p.pid for p in scan().values() if p.ppid == pid and p.state == "Z"]


async def pids_in(path: Path, at_least: int) -> list[int]:
    """The pids noted in ``path`` once there are ``at_least`` (or all there are by 20 s)."""
    with contextlib.suppress(AssertionError):
        await wait_until(lambda: len(_noted(path)) >= at_least, timeout=20)
    return _noted(path)


async def wait_gone(pids: list[int]) -> list[int]:
    """The pids still alive after a generous deadline (empty as soon as all are gone)."""
    with contextlib.suppress(AssertionError):
        await wait_until(lambda: not any(alive(p) for p in pids), timeout=20)
    return [p for p in pids if alive(p)]


async def zombies_of(pid: int) -> list[int]:
    """The daemon's zombie children left once its sweeper had time to reap (generous deadline)."""
    with contextlib.suppress(AssertionError):
        await wait_until(lambda: not _zombies(pid), timeout=20)
    return _zombies(pid)


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
    script = PRELUDE + ESCAPES["double_fork_setsid_quiet"] + "\nlinger()\n"
    out = await client.exec(argv=[sys.executable, "-c", script, str(pidfile)], timeout_s=2)
    assert out.timed_out is True
    pids = await pids_in(pidfile, 1)
    assert pids and await wait_gone(pids) == []


async def test_stream_disconnect_takes_setsid_grandchildren(
    client: DaemonClient, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pids"
    script = (
        PRELUDE + ESCAPES["double_fork_setsid_quiet"] + "\nprint('ready', flush=True)\nlinger()\n"
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
                    note(); linger()
                time.sleep(0.05)  # the point: keep forking while the sweep runs
            linger()
        os._exit(0)
    time.sleep(0.01)  # the point: the storm outlasts the 2 s timeout
linger()
"""
    out = await client.exec(argv=[sys.executable, "-c", PRELUDE + storm, str(pidfile)], timeout_s=2)
    assert out.timed_out is True
    pids = await pids_in(pidfile, 10)
    assert len(pids) >= 10
    assert await wait_gone(pids) == []
    everyone = [int(x) for x in pidfile.read_text().split()]  # late notes included
    assert await wait_gone(everyone) == []
