"""Terminals over a real airlockd: ``process_start`` with ``pty``, ``process_resize``, keystrokes.

The daemon runs as root with ``--exec-user nobody`` (when the suite runs as root),
so the terminal is checked to be the program's controlling terminal while the
program runs as the exec user.
"""

from __future__ import annotations

import json

import pytest

from airlock.client.daemon import Conflict, DaemonClient, Forbidden, InvalidRequest, NotFound
from tests.fakes.agent_daemon import CHILD_PYTHON, AgentDaemon

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def client(agent_client: DaemonClient) -> DaemonClient:
    return agent_client


class Screen:
    """What a terminal emulator would have received so far, read the way an agent reads."""

    def __init__(self, client: DaemonClient, pid_id: str) -> None:
        self.client, self.id, self.offset, self.text = client, pid_id, 0, ""
        self.running = True
        self.exit_code: int | None = None

    async def until(self, needle: str, rounds: int = 40) -> str:
        for _ in range(rounds):
            if needle in self.text:
                return self.text
            part = await self.client.process_read(id=self.id, offset=self.offset, wait_ms=1000)
            assert part.stderr == "", "a terminal has one stream"
            self.offset, self.text = part.next_offset, self.text + part.stdout
            self.running, self.exit_code = part.running, part.exit_code
            if not part.running and part.next_offset == self.offset and needle not in self.text:
                break
        raise AssertionError(f"{needle!r} never appeared; the terminal showed {self.text!r}")


PROBE = """
import json, os, signal, sys, time
size = os.get_terminal_size()
print(json.dumps({
    "tty": os.ttyname(0), "isatty": [os.isatty(i) for i in range(3)],
    "size": [size.columns, size.lines], "term": os.environ.get("TERM"),
    "uid": os.getuid(), "ctty_pgrp": os.tcgetpgrp(0) == os.getpgrp(),
}), flush=True)
signal.signal(signal.SIGWINCH, lambda *_: print("WINCH", *os.get_terminal_size(), flush=True))
print("READY", flush=True)
try:
    while True:
        signal.pause()  # SIGWINCH prints; Ctrl-C raises KeyboardInterrupt here
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
"""


async def test_the_terminal_is_the_programs_controlling_terminal(
    client: DaemonClient, agent: AgentDaemon
) -> None:
    started = await client.process_start(
        argv=["sh", "-c", f"tty; exec {CHILD_PYTHON} -c '{PROBE}'"], pty=True, cols=123, rows=45
    )
    screen = Screen(client, started.id)
    text = await screen.until("READY")
    tty_line, probe_line = text.split("\r\n")[:2]
    assert tty_line.startswith("/dev/pts/"), text
    probe = json.loads(probe_line)
    assert probe["tty"] == tty_line
    assert probe["isatty"] == [True, True, True]
    assert probe["size"] == [123, 45]
    assert probe["term"] == "xterm-256color"
    assert probe["ctty_pgrp"] is True
    if agent.exec_uid is not None:
        assert probe["uid"] == agent.exec_uid

    resized = await client.process_resize(id=started.id, cols=90, rows=20)
    assert resized.running and (resized.cols, resized.rows) == (90, 20)
    await screen.until("WINCH 90 20")

    await client.process_write(id=started.id, data="\x03")  # Ctrl-C, as a keystroke
    await screen.until("INTERRUPTED")
    listing = await client.process_list()
    assert next(p for p in listing.processes if p.id == started.id).pty is True


async def test_env_term_wins_and_keystrokes_reach_a_line_editor(client: DaemonClient) -> None:
    started = await client.process_start(
        argv=["sh", "-c", 'echo "TERM=$TERM"; read line; echo "GOT[$line]"'],
        pty=True,
        env={"TERM": "dumb"},
    )
    screen = Screen(client, started.id)
    await screen.until("TERM=dumb")
    await client.process_write(id=started.id, data="héllo\r")
    await screen.until("GOT[héllo]")


async def test_refusals(agent: AgentDaemon, client: DaemonClient) -> None:
    async with agent.reader() as reader:
        with pytest.raises(Forbidden):
            await reader.process_start(argv=["sh"], pty=True)
        with pytest.raises(Forbidden):
            await reader.process_resize(id="p1", cols=80, rows=24)
    with pytest.raises(NotFound):
        await client.process_resize(id="p999", cols=80, rows=24)
    plain = await client.process_start(argv=["sleep", "30"])
    try:
        with pytest.raises(InvalidRequest, match="pty: true"):
            await client.process_resize(id=plain.id, cols=80, rows=24)
    finally:
        await client.process_kill(id=plain.id, signal="KILL")
    with pytest.raises(InvalidRequest):
        await client.process_start(argv=["sh"], pty=True, cols=0)


async def test_keystrokes_nobody_reads_are_bounded_and_eof_is_ctrl_d(client: DaemonClient) -> None:
    deaf = await client.process_start(argv=["sleep", "60"], pty=True)
    try:
        written = 0
        with pytest.raises(Conflict, match="limit"):
            for _ in range(4):
                written += (await client.process_write(id=deaf.id, data="k" * 600_000)).written
        # The daemon's queue is what is bounded; the kernel's terminal buffer took some too.
        assert written < 4 * 600_000
    finally:
        await client.process_kill(id=deaf.id, signal="KILL")

    cat = await client.process_start(argv=["cat"], pty=True)
    screen = Screen(client, cat.id)
    await client.process_write(id=cat.id, data="line\r")
    await screen.until("line\r\nline\r\n")  # the terminal's echo, then cat's copy
    await client.process_write(id=cat.id, data="", eof=True)
    for _ in range(40):
        part = await client.process_read(id=cat.id, offset=screen.offset, wait_ms=1000)
        screen.offset = part.next_offset
        if not part.running:
            break
    assert not part.running and part.exit_code == 0
