"""Where the runner puts an engine: its own process group always, its own session (and so
its own autogroup CPU share) only when the daemon has a terminal; and a stall on a pipe."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airlock.daemon.search import runner
from airlock.daemon.search.runner import run_engine


class Collect:
    def __init__(self) -> None:
        self.data = b""

    def feed(self, data: bytes) -> bool:
        self.data += data
        return False


async def test_engine_gets_its_own_group_and_the_daemons_session_without_a_terminal(
    tmp_path: Path,
) -> None:
    parser = Collect()
    loop = asyncio.get_running_loop()
    # The shell's pid, process group and session, as the kernel sees them.
    argv = ["sh", "-c", "echo $$; cut -d' ' -f5,6 /proc/$$/stat"]
    outcome = await run_engine(argv, cwd=tmp_path, parser=parser, deadline=loop.time() + 20)
    assert outcome.complete and outcome.exit_code == 0
    pid_line, ids = parser.data.decode().split("\n")[:2]
    pgid, sid = (int(x) for x in ids.split())
    assert pgid == int(pid_line)  # its own group: killpg reaches all of it
    own_session = sid == int(pid_line)
    assert own_session == runner._OWN_SESSION
    if not runner._OWN_SESSION:
        assert sid == os.getsid(0)


@pytest.mark.skipif(shutil.which("script") is None, reason="util-linux script is not installed")
def test_a_daemon_with_a_terminal_keeps_engines_off_it() -> None:
    """Under a pseudo-terminal (``script``) the runner sees a controlling tty."""
    code = "from airlock.daemon.search import runner; print(runner._OWN_SESSION)"
    with_tty = subprocess.run(
        ["script", "-qec", f"{sys.executable} -c '{code}'", "/dev/null"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert with_tty.stdout.strip().endswith("True"), with_tty.stdout
    without = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        start_new_session=True,  # no controlling terminal, whatever ran the tests
    )
    assert without.stdout.strip() == "False", without.stdout


async def test_a_thread_waiting_on_a_fifo_is_seen_and_the_engine_stopped(tmp_path: Path) -> None:
    """The runner's own view of a stall (the daemon-level test is adversarial/
    test_search_fifo_ignore.py): ``cat`` of a FIFO nobody writes waits in open."""
    os.mkfifo(tmp_path / "fifo")
    loop = asyncio.get_running_loop()
    outcome = await asyncio.wait_for(
        run_engine(["cat", "fifo"], cwd=tmp_path, parser=Collect(), deadline=loop.time() + 25),
        15,  # the deadline above is the timeout; an answer before this is the stall check
    )
    assert outcome.pipe_stall and not outcome.timed_out and not outcome.complete
