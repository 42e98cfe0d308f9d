"""Timed HTTP requests for benches: one request's latency, a closed-loop load
(warm-up, then a measured run) and a health sampler.

Several benches time requests the same way (the body read whole, a failure
counted rather than timed), run their loads the same way and sample
airlockd's ``/v1/health`` while a load runs; all live here so the figures
mean the same thing in every table.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp


async def timed_ok(request: AbstractAsyncContextManager[aiohttp.ClientResponse]) -> float | None:
    """Milliseconds until ``request``'s body is read whole; None when it failed
    (not a 200, or a client error), so the caller counts it instead."""
    started = time.perf_counter()
    try:
        async with request as resp:
            await resp.read()
            ok = resp.status == 200
    except aiohttp.ClientError:
        return None
    return (time.perf_counter() - started) * 1000 if ok else None


@dataclass
class LoadTally:
    """What a closed-loop load records: each good request's latency (seconds)
    and how many failed (a failure is counted, never timed)."""

    latencies: list[float] = field(default_factory=list)
    errors: int = 0

    def add(self, ok: bool, started: float) -> None:
        """Record one request that began at ``started`` (``time.perf_counter()``)."""
        if ok:
            self.latencies.append(time.perf_counter() - started)
        else:
            self.errors += 1


async def warm_then_measure(
    worker: Callable[[float, bool], Awaitable[None]], concurrency: int, seconds: float
) -> float:
    """Run ``concurrency`` copies of ``worker(deadline, record)`` unrecorded for a
    second (tunnels, TLS sessions, certificates warm up), then recorded for
    ``seconds``; returns the measured run's wall time."""
    warm = time.perf_counter() + 1.0
    await asyncio.gather(*(worker(warm, False) for _ in range(concurrency)))
    started = time.perf_counter()
    await asyncio.gather(*(worker(started + seconds, True) for _ in range(concurrency)))
    return time.perf_counter() - started


async def health_samples(
    socket: Path, done: Callable[[], bool], interval_s: float = 0.01
) -> list[float]:
    """Milliseconds of airlockd ``/v1/health`` round trips, one every ``interval_s``,
    on a connection of its own, until ``done()``."""
    samples: list[float] = []
    connector = aiohttp.UnixConnector(path=str(socket), limit=1)
    async with aiohttp.ClientSession(connector=connector) as http:
        while not done():
            started = time.perf_counter()
            async with http.get("http://airlockd/v1/health") as resp:
                await resp.read()
            samples.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(interval_s)
    return samples
