"""A background process's pseudo-terminal: the master end the daemon keeps, and its plumbing.

``process_start`` with ``pty: true`` opens a pair (``os.openpty``), sizes it,
hands the slave to the child as stdin, stdout and stderr, and makes it the
child's controlling terminal (``TIOCSCTTY`` right after the ``setsid`` the
spawn already does), so ``tty``, ``isatty``, job control, Ctrl-C and
``SIGWINCH`` behave as in a terminal emulator. The daemon keeps the master:

- output is read from it on the event loop (non-blocking, ``add_reader``) into
  the process's ring as one stream, ``stdout`` (a terminal has no second one);
- keystrokes (``process_write``) go to it through a queue bounded like a
  pipe's (1 MiB), so a program that never reads cannot grow the daemon;
- ``resize`` sets the window size on it (``TIOCSWINSZ``); the kernel then sends
  ``SIGWINCH`` to the terminal's foreground process group.

The slave is given to the exec user (``fchown``, mode 0620, as ``login`` does)
when the daemon runs as root, so a program that reopens its terminal by name
can. The daemon's copy of the slave is closed right after the spawn, so the
master reads EOF (``EIO``) once every process holding the terminal is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import struct
import termios
from collections.abc import Callable

from ..errors import Conflict, InvalidRequest

DEFAULT_TERM = "xterm-256color"
MAX_QUEUED_INPUT = 1024 * 1024
_READ_CHUNK = 65536


def set_size(fd: int, cols: int, rows: int) -> None:
    """The window size of the terminal ``fd`` belongs to (either end)."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def get_size(fd: int) -> tuple[int, int]:
    """``(cols, rows)`` of the terminal ``fd`` belongs to."""
    rows, cols, _x, _y = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    return cols, rows


def take_terminal() -> None:
    """Runs in the child after ``setsid``: its stdin (the slave) becomes its controlling tty."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class PtyPair:
    """A freshly opened pair, before the spawn; ``close_slave`` once the child holds it."""

    def __init__(self, cols: int, rows: int, owner: tuple[int, int] | None) -> None:
        self.master, self.slave = os.openpty()
        try:
            os.set_inheritable(self.master, False)
            set_size(self.slave, cols, rows)
            if owner is not None:
                os.fchown(self.slave, owner[0], -1)
                os.fchmod(self.slave, 0o620)
        except BaseException:
            self.close()
            raise

    def close_slave(self) -> None:
        if self.slave >= 0:
            os.close(self.slave)
            self.slave = -1

    def close(self) -> None:
        self.close_slave()
        if self.master >= 0:
            os.close(self.master)
            self.master = -1


class PtyChannel:
    """The master end of a running process's terminal, wired to the event loop."""

    def __init__(self, master: int, on_output: Callable[[bytes], None]) -> None:
        self.fd = master
        os.set_blocking(master, False)
        self._on_output = on_output
        self._loop = asyncio.get_running_loop()
        self._pending = bytearray()
        self._writing = False
        self.eof = asyncio.Event()
        self._loop.add_reader(master, self._readable)

    # ------------------------------------------------------------ output

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, _READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:  # EIO: every holder of the slave is gone
            if exc.errno != errno.EIO:
                raise
            data = b""
        if not data:
            self._stop_reading()
            return
        self._on_output(data)

    def _stop_reading(self) -> None:
        self._loop.remove_reader(self.fd)
        self.eof.set()

    # ------------------------------------------------------------ input

    def write(self, data: bytes, pid_id: str) -> int:
        """Queue keystrokes; ``conflict`` once 1 MiB waits for a program that does not read."""
        if self.fd < 0:
            raise InvalidRequest(f"the terminal of {pid_id} is closed", {"id": pid_id})
        if len(self._pending) + len(data) > MAX_QUEUED_INPUT:
            raise Conflict(
                f"{pid_id} has not read the {len(self._pending)} bytes already queued for its "
                f"terminal (the limit is {MAX_QUEUED_INPUT}); read its output or kill it",
                {"id": pid_id, "queued": len(self._pending)},
            )
        self._pending += data
        self._flush()
        return len(data)

    def _flush(self) -> None:
        while self._pending:
            try:
                sent = os.write(self.fd, self._pending)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._pending.clear()  # the terminal is gone: nobody will read it
                break
            del self._pending[:sent]
        if self._pending and not self._writing:
            self._loop.add_writer(self.fd, self._flush)
            self._writing = True
        elif not self._pending and self._writing:
            self._loop.remove_writer(self.fd)
            self._writing = False

    # ------------------------------------------------------------ control

    def resize(self, cols: int, rows: int) -> None:
        """New window size; the kernel sends SIGWINCH to the foreground process group."""
        set_size(self.fd, cols, rows)

    def close(self) -> None:
        if self.fd < 0:
            return
        if not self.eof.is_set():
            self._stop_reading()
        if self._writing:
            self._loop.remove_writer(self.fd)
            self._writing = False
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = -1
