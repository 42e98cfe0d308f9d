"""``airlock attach ID``: the local terminal connected to a background process's terminal.

Like ``docker attach``: the local terminal goes into raw mode, every keystroke
(Ctrl-C included) is sent with ``process_write``, the process's output is
followed with long-polling ``process_read`` and written out as it arrives, and
the local window size is sent with ``process_resize`` at the start and on every
``SIGWINCH``. Ctrl-P Ctrl-Q detaches and leaves the process running; when the
process exits, attach exits with its code (128+N for a signal N). The local
terminal's mode is restored on every way out (detach, exit, an error, a signal).
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import contextlib
import os
import signal
import sys
import termios
import tty
from collections.abc import Iterator

from ..daemon import AirlockError, DaemonClient
from .connection import connect, daemon_command

DETACH = b"\x10\x11"  # Ctrl-P Ctrl-Q
_POLL_MS = 30000


@contextlib.contextmanager
def raw_terminal(fd: int) -> Iterator[bool]:
    """Raw mode on ``fd`` while inside; the saved mode is put back however the block ends.

    Yields False (and changes nothing) when ``fd`` is not a terminal.
    """
    if not os.isatty(fd):
        yield False
        return
    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd, termios.TCSANOW)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


class DetachFilter:
    """Finds Ctrl-P Ctrl-Q in the keystrokes, even split across reads; the rest passes."""

    def __init__(self) -> None:
        self.held = b""

    def feed(self, data: bytes) -> tuple[bytes, bool]:
        """(bytes to send, detach?)."""
        data = self.held + data
        self.held = b""
        at = data.find(DETACH)
        if at >= 0:
            return data[:at], True
        if data.endswith(DETACH[:1]):
            self.held = DETACH[:1]
            data = data[:-1]
        return data, False


async def _follow(client: DaemonClient, pid_id: str, offset: int, out_fd: int) -> int:
    """Write the process's output until it exits; its exit status for the shell."""
    while True:
        part = await client.process_read(
            id=pid_id, offset=offset, max_bytes=1024 * 1024, wait_ms=_POLL_MS
        )
        text = part.stdout + part.stderr
        if text:
            data = text.encode()
            while data:
                data = data[os.write(out_fd, data) :]
        moved = part.next_offset != offset
        offset = part.next_offset
        if not part.running and not moved:
            if part.exit_code is not None:
                return part.exit_code
            return 128 + (part.signal or 0)


async def _keys(client: DaemonClient, pid_id: str, in_fd: int) -> None:
    """Send keystrokes until the detach sequence (or end of input)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue()

    def readable() -> None:
        try:
            queue.put_nowait(os.read(in_fd, 4096))
        except OSError:
            queue.put_nowait(b"")

    loop.add_reader(in_fd, readable)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    detach = DetachFilter()
    try:
        while True:
            data = await queue.get()
            if not data:
                return
            send, leave = detach.feed(data)
            text = decoder.decode(send)
            if text:
                await client.process_write(id=pid_id, data=text)
            if leave:
                return
    finally:
        loop.remove_reader(in_fd)


async def attach(client: DaemonClient, pid_id: str, in_fd: int, out_fd: int) -> int:
    listing = await client.process_list()
    info = next((p for p in listing.processes if p.id == pid_id), None)
    if info is None:
        print(
            f"airlock attach: there is no process {pid_id!r}; airlock ps lists them",
            file=sys.stderr,
        )
        return 1
    if not info.pty:
        print(
            f"airlock attach: {pid_id} has no terminal (it was not started with pty: true); "
            f"follow its output with airlock logs {pid_id} -f",
            file=sys.stderr,
        )
        return 1
    loop = asyncio.get_running_loop()

    async def send_size() -> None:
        with contextlib.suppress(OSError, AirlockError):
            size = os.get_terminal_size(out_fd if os.isatty(out_fd) else in_fd)
            await client.process_resize(id=pid_id, cols=size.columns, rows=size.lines)

    pending: set[asyncio.Task[None]] = set()

    def on_winch() -> None:
        task = loop.create_task(send_size())
        pending.add(task)
        task.add_done_callback(pending.discard)

    with raw_terminal(in_fd):
        await send_size()
        loop.add_signal_handler(signal.SIGWINCH, on_winch)
        follow = asyncio.create_task(_follow(client, pid_id, info.output_bytes, out_fd))
        keys = asyncio.create_task(_keys(client, pid_id, in_fd))
        try:
            done, _ = await asyncio.wait({follow, keys}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            loop.remove_signal_handler(signal.SIGWINCH)
            for task in (follow, keys, *pending):
                task.cancel()
            await asyncio.gather(follow, keys, *pending, return_exceptions=True)
        if follow in done:
            code = follow.result()
            message = f"\r\n[airlock: {pid_id} exited with {code}]\r\n"
        else:
            keys.result()
            code = 0
            message = f"\r\n[airlock: detached from {pid_id}; it keeps running]\r\n"
    os.write(out_fd, message.encode())
    return code


async def _attach(args: argparse.Namespace) -> int:
    async with connect(args) as client:
        try:
            return await attach(client, args.id, sys.stdin.fileno(), sys.stdout.fileno())
        except AirlockError as exc:
            print(f"airlock attach: {exc.code}: {exc.message}", file=sys.stderr)
            return 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    att = daemon_command(
        sub,
        "attach",
        "connect this terminal to a background process's terminal (detach: Ctrl-P Ctrl-Q)",
        _attach,
    )
    att.add_argument("id", help="process id from airlock ps (started with pty: true), e.g. p1")
