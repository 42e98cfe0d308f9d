"""``exec`` and ``/v1/exec/stream``: run argv without a shell, with a timeout, leaving nothing behind.

One core (:func:`run_exec`) serves both: the plain tool collects output (the
tail or head in memory, the rest spilled), the stream additionally hands every
chunk to a callback as it is read. The timeout covers the whole call, feeding
``stdin`` included (a command that never reads a huge stdin still times out).

Nothing a command starts outlives its call: its process group is killed on
timeout or cancellation (the client went away: the server runs with handler
cancellation), and at the end :class:`~airlock.daemon.procs.tree.TreeGuard`
sweeps every remaining descendant, including ``setsid``'d and double-forked
ones (see that module for the mechanism and its limits). Only ``process_start``
makes processes that stay.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from ..context import ToolContext
from ..procs.group import kill_group
from ..procs.pipes import widen_output
from ..procs.spawn import plan_spawn, spawn
from ..procs.spill import CappedStream, SpillBudget, new_call_id
from ..procs.tree import TreeGuard
from ..protocol import ExecInput, ExecOutput

# Large reads: fewer wake-ups and writes per MB; a stream cuts them into 64 KiB events.
_CHUNK = 256 * 1024
_DRAIN_GRACE_S = 1.0
_TRACK_INTERVAL_S = 0.05

OnStart = Callable[[int], Awaitable[None]]
OnOutput = Callable[[str, bytes], Awaitable[None]]


class _Flow:
    """How many pumps are handing a chunk to a (possibly slow) stream listener right now."""

    delivering = 0


async def _pump(
    reader: asyncio.StreamReader | None,
    name: str,
    sink: CappedStream,
    on_output: OnOutput | None,
    pgid: int,
    flow: _Flow,
) -> None:
    if reader is None:
        return
    while chunk := await reader.read(_CHUNK):
        if on_output is not None:
            flow.delivering += 1
            try:
                await on_output(name, chunk)
            except BaseException:
                # The listener is gone (a stream client hung up): nobody will read the rest.
                kill_group(pgid)
                raise
            finally:
                flow.delivering -= 1
        await sink.feed(chunk)


async def _feed_stdin(proc: asyncio.subprocess.Process, data: bytes) -> None:
    """Write stdin and close it; a command that exits without reading it is fine."""
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(data)
        await proc.stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.close()


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


async def _track(guard: TreeGuard) -> None:
    """Remember the command's subtree while it runs, so a double fork cannot hide a member."""
    while True:
        # In a worker thread: a hostile command's tree can be large, the loop must stay free.
        await asyncio.to_thread(guard.track)
        await asyncio.sleep(_TRACK_INTERVAL_S)


async def run_exec(
    ctx: ToolContext,
    req: ExecInput,
    *,
    on_start: OnStart | None = None,
    on_output: OnOutput | None = None,
) -> ExecOutput:
    """Run ``req`` to the end (or the timeout); every process it started is gone on return."""
    call_id = new_call_id()
    plan = plan_spawn(ctx, req.argv, req.cwd, req.env, req.granted_paths, call_id)
    store = ctx.procs.spills
    budget = SpillBudget(store.per_exec_cap)
    # A stream client receives every byte as it is read: a spill file would be a second copy
    # written at the stream's speed, so a streamed command keeps only its head or tail.
    spill_to_disk = on_output is None
    out = CappedStream(
        req.max_output_bytes,
        req.keep,
        store.directory / f"{call_id}.stdout",
        store,
        budget,
        spill=spill_to_disk,
    )
    err = CappedStream(
        req.max_output_bytes,
        req.keep,
        store.directory / f"{call_id}.stderr",
        store,
        budget,
        spill=spill_to_disk,
    )
    started = time.monotonic()
    cell = ctx.procs.containment.cell(call_id)
    try:
        proc = await spawn(ctx, plan, stdin=req.stdin is not None, cell=cell)
    except BaseException:
        cell.close()
        raise
    if on_output is not None:
        widen_output(proc)
    guard = TreeGuard(proc.pid, call_id, cell)
    tracker = asyncio.create_task(_track(guard))
    tasks: list[asyncio.Task[None]] = [tracker]
    timed_out = False
    swept = False
    try:
        if on_start is not None:
            await on_start(proc.pid)
        flow = _Flow()
        pumps = [
            asyncio.create_task(_pump(proc.stdout, "stdout", out, on_output, proc.pid, flow)),
            asyncio.create_task(_pump(proc.stderr, "stderr", err, on_output, proc.pid, flow)),
        ]
        tasks.extend(pumps)
        if req.stdin is not None:
            tasks.append(asyncio.create_task(_feed_stdin(proc, req.stdin.encode())))
        try:
            await asyncio.wait_for(_wait_exit(proc), timeout=req.timeout_s)
        except TimeoutError:
            timed_out = True
            kill_group(proc.pid)
            await _wait_exit(proc)
        # Give the pipes a moment (output still buffered, a grandchild finishing), then
        # take down whatever is left and read the pipes to their end.
        _done, pending = await asyncio.wait(pumps, timeout=_DRAIN_GRACE_S)
        tracker.cancel()
        await asyncio.to_thread(guard.kill_all, (proc.pid,))
        swept = True
        # Everything that could write is gone: read to the end while output still flows or a
        # slow stream client is still taking it; stop once a grace passes with neither (an
        # escapee we could not kill holds the pipe open without writing).
        while pending:
            before = out.total + err.total
            _done, pending = await asyncio.wait(pending, timeout=_DRAIN_GRACE_S)
            if out.total + err.total == before and not flow.delivering:
                break
    finally:
        if not swept:
            # Cancelled (the client went away) or failed: the group dies now; the sweep runs
            # in a worker thread that a second cancellation cannot stop halfway.
            kill_group(proc.pid)
            tracker.cancel()
            await asyncio.shield(
                asyncio.ensure_future(asyncio.to_thread(guard.kill_all, (proc.pid,)))
            )
        cell.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await out.aclose()
        await err.aclose()
        # The spill files stay out of the quota's reach until the call has returned.
        store.release(out.spill_path, err.spill_path)
    code = proc.returncode
    spill: Path | None = None
    if out.truncated and out.spill:
        spill = out.spill_path
    elif err.truncated and err.spill:
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


async def exec_tool(ctx: ToolContext, req: ExecInput) -> ExecOutput:
    return await run_exec(ctx, req)
