"""ThreadHop: results, errors, cancellation, concurrency, idle exit and close."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import pytest

from airlock.daemon.offload import ThreadHop
from tests.fakes.wait import wait_until


def _gated(started: threading.Event, gate: threading.Event) -> bool:
    """A job that says it runs, then holds its worker until ``gate`` opens."""
    started.set()
    return gate.wait(10)


def _worker_threads() -> int:
    """Live hop workers in this process (other tests' workspaces may still have some)."""
    return sum(1 for t in threading.enumerate() if t.name == "airlockd-io")


async def test_result_runs_off_the_loop_thread() -> None:
    hop = ThreadHop()
    loop_thread = threading.get_ident()
    try:
        assert await hop.run(threading.get_ident) != loop_thread
        assert await hop.run(lambda: 41 + 1) == 42
    finally:
        hop.close()


async def test_exception_reaches_the_caller_unchanged() -> None:
    hop = ThreadHop()
    try:
        with pytest.raises(FileNotFoundError, match="nope"):
            await hop.run(lambda: open("/nonexistent/nope"))  # noqa: SIM115
        assert await hop.run(lambda: "still working") == "still working"
    finally:
        hop.close()


@contextlib.asynccontextmanager
async def _one_blocked(
    max_workers: int,
) -> AsyncIterator[tuple[ThreadHop, threading.Event, asyncio.Future[bool]]]:
    """A hop with one job running and held until the yielded gate opens (closed on exit)."""
    hop = ThreadHop(max_workers=max_workers)
    gate, started = threading.Event(), threading.Event()
    try:
        blocked = asyncio.ensure_future(hop.run(partial(_gated, started, gate)))
        await wait_until(started.is_set, message="the blocking job never started")
        yield hop, gate, blocked
    finally:
        gate.set()
        hop.close()


async def test_a_blocked_job_does_not_stall_the_others() -> None:
    async with _one_blocked(4) as (hop, gate, blocked):
        assert await asyncio.wait_for(hop.run(lambda: "quick"), 5) == "quick"
        assert not blocked.done()
        gate.set()
        assert await blocked is True


async def test_cancelled_caller_leaves_the_worker_usable() -> None:
    async with _one_blocked(1) as (hop, gate, call):
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        gate.set()  # the job finishes after its caller is gone
        assert await asyncio.wait_for(hop.run(lambda: "next"), 5) == "next"


async def test_many_concurrent_calls_all_answer() -> None:
    hop = ThreadHop(max_workers=3)
    try:
        results = await asyncio.gather(*(hop.run(partial(pow, i, 2)) for i in range(200)))
        assert results == [i * i for i in range(200)]
    finally:
        hop.close()


async def test_idle_workers_exit_and_come_back() -> None:
    before = _worker_threads()
    hop = ThreadHop(max_workers=2, idle_seconds=0.1)
    try:
        both = threading.Barrier(2)  # two jobs at once: two workers
        await asyncio.gather(*(hop.run(partial(both.wait, 5)) for _ in range(2)))
        with contextlib.suppress(AssertionError):
            await wait_until(lambda: _worker_threads() <= before, timeout=5)
        assert _worker_threads() <= before
        assert await hop.run(lambda: "again") == "again"
    finally:
        hop.close()


async def test_close_stops_workers_and_refuses_new_work() -> None:
    before = _worker_threads()
    hop = ThreadHop(max_workers=2)
    both = threading.Barrier(2)  # two jobs at once: two workers
    await asyncio.gather(*(hop.run(partial(both.wait, 5)) for _ in range(2)))
    hop.close()
    hop.close()  # idempotent
    with contextlib.suppress(AssertionError):
        await wait_until(lambda: _worker_threads() <= before, timeout=5)
    assert _worker_threads() <= before
    with pytest.raises(RuntimeError, match="closed"):
        await hop.run(lambda: None)


async def test_sequential_calls_after_a_burst_reuse_the_last_worker() -> None:
    hop = ThreadHop(max_workers=4)
    try:
        burst = threading.Barrier(4)  # four jobs at once: four workers
        await asyncio.gather(*(hop.run(partial(burst.wait, 5)) for _ in range(4)))
        idents = {await hop.run(threading.get_ident) for _ in range(20)}
        assert len(idents) == 1  # last in, first out: the warm worker keeps the work
    finally:
        hop.close()


async def test_close_still_runs_the_jobs_already_accepted() -> None:
    hop = ThreadHop(max_workers=1)
    gate, started = threading.Event(), threading.Event()
    first = asyncio.ensure_future(hop.run(partial(_gated, started, gate)))
    await wait_until(started.is_set, message="the first job never started")
    queued = [asyncio.ensure_future(hop.run(partial(int, i))) for i in range(5)]
    await wait_until(lambda: len(hop._backlog) == 5, message="the jobs were never queued")
    hop.close()
    gate.set()
    assert await first is True
    assert await asyncio.gather(*queued) == list(range(5))


def _eventfds() -> int:
    fds = Path("/proc/self/fd")
    count = 0
    for entry in fds.iterdir():
        with contextlib.suppress(OSError):
            count += os.readlink(entry) == "anon_inode:[eventfd]"
    return count


def test_one_hop_serves_successive_event_loops_and_closes_its_eventfds() -> None:
    if not Path("/proc/self/fd").is_dir():
        pytest.skip(
            "needs /proc to count descriptors: the eventfd leak check did not run; it is NOT a pass"
        )
    before = _eventfds()
    hop = ThreadHop()

    async def use() -> list[int]:
        return list(await asyncio.gather(*(hop.run(partial(pow, i, 3)) for i in range(20))))

    assert asyncio.run(use()) == [i**3 for i in range(20)]
    assert asyncio.run(use()) == [i**3 for i in range(20)]  # a new loop, a new channel

    async def finish() -> None:
        await hop.run(lambda: None)
        hop.close()

    asyncio.run(finish())
    assert _eventfds() <= before


async def test_errors_and_results_interleave_through_one_channel() -> None:
    hop = ThreadHop(max_workers=4)

    def job(i: int) -> int:
        if i % 3 == 0:
            raise ValueError(i)
        return i

    try:
        outcomes = await asyncio.gather(
            *(hop.run(partial(job, i)) for i in range(60)), return_exceptions=True
        )
        for i, outcome in enumerate(outcomes):
            if i % 3 == 0:
                assert isinstance(outcome, ValueError) and outcome.args == (i,)
            else:
                assert outcome == i
    finally:
        hop.close()
