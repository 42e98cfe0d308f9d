"""Loopback helpers every harness and bench shares: a free port, and waiting for one to listen."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_port(
    port: int, proc: subprocess.Popen[bytes] | None = None, timeout: float = 20
) -> None:
    """Return once 127.0.0.1:``port`` accepts; fail early if ``proc`` exited."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            await writer.wait_closed()
            return
        except OSError:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"process exited with {proc.returncode}") from None
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
