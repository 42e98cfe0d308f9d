"""``airlock attach`` under a real pseudo-terminal (``pty.fork``), against a real airlockd.

The CLI runs in a child whose controlling terminal is a pty this test holds the
master of, exactly as a terminal emulator would: the test types, reads the
screen, detaches, and checks the terminal's mode afterwards (``tcgetattr`` on
the master reports the slave's settings).
"""

from __future__ import annotations

import errno
import os
import pty
import sys
import termios

import pytest

from airlock.client.daemon import DaemonClient
from tests.fakes.agent_daemon import WRITE_TOKEN, AgentDaemon
from tests.fakes.wait import wait_until

pytestmark = pytest.mark.asyncio(loop_scope="module")

CHILD = """
import sys, termios
from airlock.client.cli import main
before = termios.tcgetattr(0)
code = main(sys.argv[1:])
after = termios.tcgetattr(0)
sys.stdout.write(f"\\r\\nEXIT {code} RESTORED {before == after}\\r\\n")
sys.stdout.flush()
"""


@pytest.fixture
def client(agent_client: DaemonClient) -> DaemonClient:
    return agent_client


class Terminal:
    """The emulator side of ``pty.fork``: what the child printed, and keystrokes to it."""

    def __init__(self, argv: list[str]) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: the CLI, on the pty
            try:
                os.execv(sys.executable, [sys.executable, "-c", CHILD, *argv])
            finally:
                os._exit(127)
        self.pid, self.fd, self.screen = pid, fd, b""
        os.set_blocking(fd, False)

    def pump(self) -> bytes:
        try:
            while chunk := os.read(self.fd, 65536):
                self.screen += chunk
        except BlockingIOError:
            pass
        except OSError as exc:  # EIO: the child closed the terminal
            if exc.errno != errno.EIO:
                raise
        return self.screen

    async def shows(self, needle: bytes, count: int = 1) -> None:
        await wait_until(
            lambda: self.pump().count(needle) >= count,
            timeout=20,
            message=f"{needle!r} x{count} never showed; the screen is {self.screen!r}",
        )

    def lflag(self) -> int:
        return int(termios.tcgetattr(self.fd)[3])

    async def raw(self) -> None:
        await wait_until(
            lambda: self.pump() is not None and not self.lflag() & termios.ECHO,
            timeout=20,
            message=f"attach never put the terminal in raw mode; the screen is {self.screen!r}",
        )
        assert self.screen == b"", self.screen

    def type(self, data: bytes) -> None:
        os.write(self.fd, data)

    def close(self) -> None:
        try:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(self.fd)


def attach_argv(agent: AgentDaemon, pid_id: str) -> list[str]:
    return ["attach", pid_id, "--socket", str(agent.daemon.socket), "--token", WRITE_TOKEN]


async def test_type_see_detach_and_the_terminal_is_restored(
    agent: AgentDaemon, client: DaemonClient
) -> None:
    started = await client.process_start(argv=["cat"], pty=True)
    term = Terminal(attach_argv(agent, started.id))
    try:
        cooked = termios.tcgetattr(term.fd)
        assert cooked[3] & termios.ECHO and cooked[3] & termios.ICANON
        await term.raw()
        term.type(b"hello airlock\r")
        # The remote terminal echoes the line, then cat prints it back: twice.
        await term.shows(b"hello airlock", count=2)
        term.type(b"\x10")  # Ctrl-P alone is held back, not yet sent
        term.type(b"\x11")  # Ctrl-Q completes the detach sequence
        await term.shows(b"EXIT 0 RESTORED True")
        assert termios.tcgetattr(term.fd) == cooked
        assert b"detached" in term.screen
    finally:
        term.close()
    listing = await client.process_list()
    assert next(p for p in listing.processes if p.id == started.id).running

    # Attach again: Ctrl-C goes to the program as a keystroke; attach exits with its status.
    term = Terminal(attach_argv(agent, started.id))
    try:
        await term.raw()
        term.type(b"\x03")
        await term.shows(b"EXIT 130 RESTORED True")
        assert termios.tcgetattr(term.fd) == cooked
    finally:
        term.close()


async def test_attach_refuses_a_process_without_a_terminal(
    agent: AgentDaemon, client: DaemonClient
) -> None:
    started = await client.process_start(argv=["sleep", "30"])
    term = Terminal(attach_argv(agent, started.id))
    try:
        await term.shows(b"EXIT 1 RESTORED True")
        assert b"logs" in term.screen
    finally:
        term.close()
        await client.process_kill(id=started.id, signal="KILL")
