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
