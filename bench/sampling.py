"""Timed HTTP requests for benches: one request's latency, and a health sampler.

Several benches time requests the same way (the body read whole, a failure
counted rather than timed) and sample airlockd's ``/v1/health`` while a load
runs; both live here so the figures mean the same thing in every table.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
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
