"""Streamed commands get wider output pipes (daemon/procs/pipes.py)."""

from __future__ import annotations

import asyncio
import fcntl

import pytest

from airlock.daemon.procs.pipes import STREAM_PIPE_BYTES, widen_output

F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)


def pipe_sizes(proc: asyncio.subprocess.Process) -> list[int]:
    transport = getattr(proc, "_transport")  # noqa: B009 - asyncio keeps the pipes there
    return [
        fcntl.fcntl(transport.get_pipe_transport(fd).get_extra_info("pipe").fileno(), F_GETPIPE_SZ)
        for fd in (1, 2)
    ]


@pytest.mark.asyncio
async def test_stdout_and_stderr_grow_to_a_mebibyte() -> None:
    proc = await asyncio.create_subprocess_exec(
        "cat", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert all(size < STREAM_PIPE_BYTES for size in pipe_sizes(proc))
        widen_output(proc)
        assert pipe_sizes(proc) == [STREAM_PIPE_BYTES, STREAM_PIPE_BYTES]
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        await proc.wait()


@pytest.mark.asyncio
async def test_a_process_without_pipes_is_left_alone() -> None:
    proc = await asyncio.create_subprocess_exec(
        "true", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    widen_output(proc)  # nothing to widen: no error
    assert await proc.wait() == 0
