"""``exec``: run argv without a shell, in its own process group, with capped output.

The process group is killed whole on timeout and when the request is
cancelled (the client went away), so no grandchild outlives its call. Output
beyond the cap is streamed to a spill file in the artifacts directory instead
of memory, and its path is returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import time
from collections import deque
from pathlib import Path
from typing import BinaryIO

from airlock.daemon.context import ToolContext
from airlock.daemon.errors import InvalidRequest, IsDirectory, NotFound
from airlock.daemon.identity import spawn_kwargs
from airlock.daemon.protocol import ExecInput, ExecOutput

_CHUNK = 65536
_DRAIN_GRACE_S = 1.0


class CappedStream:
    """Keeps the head or the tail of a stream in memory, spilling the whole to disk past the cap."""

    def __init__(self, cap: int, keep: str, spill_path: Path) -> None:
        self.cap = cap
        self.keep = keep
        self.spill_path = spill_path
        self.total = 0
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_len = 0
        self._spill: BinaryIO | None = None

    async def feed(self, data: bytes) -> None:
        """Take one chunk; past the cap, the whole stream goes to the spill file.

        Spill writes run in a worker thread, in order (one chunk awaited at a
        time), so a chatty command never blocks the event loop on disk.
        """
        if self._spill is None and self.total + len(data) > self.cap:
            earlier = bytes(self._head) if self.keep == "head" else b"".join(self._tail)
            self._spill = await asyncio.to_thread(self._open_spill)
            data_to_spill = earlier + data
        else:
            data_to_spill = data
        self.total += len(data)
        if self._spill is not None:
            await asyncio.to_thread(self._spill.write, data_to_spill)
        if self.keep == "head":
            room = self.cap - len(self._head)
            if room > 0:
                self._head += data[:room]
        else:
            self._tail.append(data)
            self._tail_len += len(data)
            while self._tail_len - len(self._tail[0]) >= self.cap:
                self._tail_len -= len(self._tail.popleft())

    def _open_spill(self) -> BinaryIO:
        self.spill_path.parent.mkdir(parents=True, exist_ok=True)
        return open(self.spill_path, "wb")

    async def aclose(self) -> None:
        if self._spill is not None:
            await asyncio.to_thread(self._spill.close)

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        data = bytes(self._head) if self.keep == "head" else b"".join(self._tail)[-self.cap :]
        return data.decode("utf-8", errors="replace")


async def _pump(reader: asyncio.StreamReader | None, sink: CappedStream) -> None:
    if reader is None:
        return
    while chunk := await reader.read(_CHUNK):
        await sink.feed(chunk)


async def _wait_exit(proc: asyncio.subprocess.Process) -> None:
    """Return when the process has exited, even if a child still holds its pipes.

    ``Process.wait()`` on this Python also waits for the pipes to close, so a
    backgrounded grandchild would hold the call hostage; the return code is
    known as soon as the process exits, so poll it beside ``wait()``.
    """
    waiter = asyncio.ensure_future(proc.wait())
    try:
        while proc.returncode is None:
            await asyncio.wait({waiter}, timeout=0.05)
    finally:
        waiter.cancel()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def exec_tool(ctx: ToolContext, req: ExecInput) -> ExecOutput:
    cwd = ctx.resolve(req.cwd, intent="read", granted=req.granted_paths)
    if not cwd.real.exists():
        raise NotFound(f"working directory {cwd.display} does not exist", {"cwd": cwd.display})
    if not cwd.real.is_dir():
        raise IsDirectory(f"cwd {cwd.display} is a file; pass a directory", {"cwd": cwd.display})
    user = ctx.config.exec_user
    env = {**os.environ, **(user.env() if user is not None else {}), **req.env}
    call_id = f"exec-{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}"
    out = CappedStream(req.max_output_bytes, req.keep, ctx.config.artifacts / f"{call_id}.stdout")
    err = CappedStream(req.max_output_bytes, req.keep, ctx.config.artifacts / f"{call_id}.stderr")
    started = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            *req.argv,
            cwd=cwd.real,
            env=env,
            stdin=asyncio.subprocess.PIPE if req.stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            **spawn_kwargs(user),
        )
    except FileNotFoundError:
        raise NotFound(
            f"program {req.argv[0]!r} was not found; give its full path or check that it is "
            "installed (exec runs argv directly, without a shell)",
            {"argv0": req.argv[0]},
        ) from None
    except PermissionError:
        raise InvalidRequest(
            f"program {req.argv[0]!r} is not executable", {"argv0": req.argv[0]}
        ) from None
    pgid = proc.pid
    pumps = [
        asyncio.create_task(_pump(proc.stdout, out)),
        asyncio.create_task(_pump(proc.stderr, err)),
    ]
    timed_out = False
    try:
        if req.stdin is not None and proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(req.stdin.encode())
                await proc.stdin.drain()
            proc.stdin.close()
        try:
            await asyncio.wait_for(_wait_exit(proc), timeout=req.timeout_s)
        except TimeoutError:
            timed_out = True
            _kill_group(pgid)
            await _wait_exit(proc)
        # Children that kept the pipes open must not hold the call hostage.
        _done, pending = await asyncio.wait(pumps, timeout=_DRAIN_GRACE_S)
        if pending:
            _kill_group(pgid)
            await asyncio.wait(pending, timeout=_DRAIN_GRACE_S)
    except asyncio.CancelledError:
        _kill_group(pgid)
        raise
    finally:
        for task in pumps:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        await out.aclose()
        await err.aclose()
    code = proc.returncode
    spill: Path | None = None
    if out.truncated:
        spill = out.spill_path
    elif err.truncated:
        spill = err.spill_path
    return ExecOutput(
        exit_code=code if code is not None and code >= 0 else None,
        signal=-code if code is not None and code < 0 else None,
        timed_out=timed_out,
        duration_ms=int((time.monotonic() - started) * 1000),
        stdout=out.text(),
        stderr=err.text(),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        spill_path=str(spill) if spill is not None else None,
    )
