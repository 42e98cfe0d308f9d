"""Polling instead of fixed sleeps: wait until a condition holds, with a deadline.

A fixed ``sleep(0.3)`` before an assert is both slow (it always waits) and
flaky (a loaded CI machine needs longer). These helpers return as soon as the
condition holds and fail with a message after a generous deadline.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0


@overload
async def wait_until(
    condition: Callable[[], Awaitable[T]],
    *,
    timeout: float = ...,
    interval: float = ...,
    max_interval: float = ...,
    message: str = ...,
) -> T: ...
@overload
async def wait_until(
    condition: Callable[[], T],
    *,
    timeout: float = ...,
    interval: float = ...,
    max_interval: float = ...,
    message: str = ...,
) -> T: ...
async def wait_until(
    condition: Callable[[], Awaitable[T] | T],
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    interval: float = 0.02,
    max_interval: float = 0.25,
    message: str = "condition never held",
) -> T:
    """Await until ``condition()`` (sync or async) returns a truthy value; return it.

    The interval grows to at most ``max_interval`` (0.25 s), so a slow condition
    (a subprocess, a network round trip) is not hammered; a race that must see
    the condition within a window passes a smaller one.
    """
    deadline = time.monotonic() + timeout
    pause = interval
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} (waited {timeout:.0f} s)")
        await asyncio.sleep(pause)
        pause = min(pause * 1.5, max_interval)


def wait_until_sync(
    condition: Callable[[], T],
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    interval: float = 0.02,
    max_interval: float = 0.25,
    message: str = "condition never held",
) -> T:
    """:func:`wait_until` for synchronous tests."""
    deadline = time.monotonic() + timeout
    pause = interval
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} (waited {timeout:.0f} s)")
        time.sleep(pause)
        pause = min(pause * 1.5, max_interval)


async def pace(interval: float) -> None:
    """Let ``interval`` seconds pass between two samples of a sampler, probe or ticker.

    Pacing is not waiting. A sampler (``/v1/health`` every 20 ms while a heavy
    call runs, a ticker that counts how freely the loop turns) runs at a steady
    tempo until its own stop signal, and nothing it asserts depends on how long
    one pause was. A test that needs something to *have happened* waits for it
    with :func:`wait_until` instead.
    """
    await asyncio.sleep(interval)


def pace_sync(interval: float) -> None:
    """:func:`pace` for a sampler on a thread or in a synchronous test."""
    time.sleep(interval)


async def yield_to_loop() -> None:
    """Give every other task that is ready to run one turn, then go on.

    Not a wait either: it orders work that is already runnable (a request just
    sent, a reader just started, a hook that must really suspend). What the test
    asserts holds whichever way that order falls; the turn only makes the
    interesting interleaving the likely one.
    """
    await asyncio.sleep(0)


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return not handle.read().rsplit(") ", 1)[1].startswith("Z")
    except (FileNotFoundError, IndexError):
        return False
