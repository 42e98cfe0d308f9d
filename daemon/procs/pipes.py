"""Wider output pipes for a command whose output is streamed.

A pipe holds 64 KiB by default: a command writing fast fills it, blocks, and
the daemon wakes up once per 64 KiB. On a busy machine every such hand-off
costs a scheduling round, so the stream runs at the speed of context
switches. A 1 MiB pipe (``F_SETPIPE_SZ``, the unprivileged maximum by
default) lets the command run ahead and the daemon read 256 KiB at a time.
Best effort: a user over its pipe-memory limit keeps the default size.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
STREAM_PIPE_BYTES = 1024 * 1024


def widen_output(proc: asyncio.subprocess.Process, size: int = STREAM_PIPE_BYTES) -> None:
    """Grow the read ends of ``proc``'s stdout and stderr pipes to ``size`` where allowed."""
    transport = getattr(proc, "_transport", None)  # asyncio keeps the pipes there
    if transport is None:
        return
    for fd in (1, 2):
        pipe = transport.get_pipe_transport(fd)
        if pipe is None:
            continue
        file = pipe.get_extra_info("pipe")
        if file is None:
            continue
        with contextlib.suppress(OSError, ValueError):
            fcntl.fcntl(file.fileno(), F_SETPIPE_SZ, size)
