"""Proxy events: what an orchestrator acts on, in order, without a secret.

Events are derived from the audit log's lines (one source of truth for what
happened): :class:`EventTap` is given every audit write and turns the ones an
orchestrator acts on into events:

- ``exfiltration_attempt``: a refusal whose reason is ``exfiltration_*``;
- ``lease_scope``: a refusal whose reason is ``lease_scope``;
- ``limit``: a refusal with status 429 or 431 (at most one per session,
  reason and second, so a flood cannot push the rest out of the buffer);
- ``lease_installed`` / ``lease_removed`` / ``lease_expired``;
- ``session_closed`` (deleted or expired; ``cause`` says which).

Each event is ``{seq, at, type, session, ...detail}``; the detail is the audit
line's metadata (host, lease, reason, method, path, message), which never holds
a token or a placeholder.

Where events live (the choice for several replicas): with the memory store,
in a bounded ring in this process (``seq`` from 1 per process start). With
the Redis store, in one Redis stream shared by every replica
(``{prefix}events``, capped at :data:`MAX_EVENTS` entries): a Lua script
draws ``seq`` from one counter and appends in the same step, so every replica
sees one order, and a long poll on any replica's control API wakes on events
any replica wrote. Appends leave the request path through a queue, in order.
With ``--store-key-file`` each event is sealed like every store value.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from typing import Any

from .audit import AuditLog
from .protocol import Event
from .store.base import StoreUnavailable
from .store.crypto import Sealer, SealError

log = logging.getLogger("airlock.proxy.events")

__all__ = [
    "MAX_EVENTS",
    "EventLog",
    "EventTap",
    "MemoryEvents",
    "RedisEvents",
    "TappedAudit",
    "map_audit",
]

MAX_EVENTS = 10_000
MAX_PAGE = 500
# Audit fields never copied into an event (defence in depth: none holds a secret).
_DROP = frozenset({"ts", "event", "token", "placeholder", "authorization"})


def map_audit(event: str, fields: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The event an audit line stands for, or None."""
    detail = {k: v for k, v in fields.items() if k not in _DROP and v is not None}
    if event == "refusal":
        reason = str(fields.get("reason", ""))
        if reason.startswith("exfiltration"):
            return "exfiltration_attempt", detail
        if reason == "lease_scope":
            return "lease_scope", detail
        if fields.get("status") in (429, 431):
            return "limit", detail
        return None
    if event in ("lease_created", "lease_replaced"):
        return "lease_installed", detail
    if event == "lease_deleted":
        return "lease_removed", detail
    if event == "lease_expired":
        return "lease_expired", detail
    if event in ("session_deleted", "session_expired"):
        detail.setdefault("cause", event.removeprefix("session_"))
        return "session_closed", detail
    return None


class EventLog(ABC):
    """Append (from sync code) and read (long poll) events."""

    @abstractmethod
    def append(self, type_: str, detail: dict[str, Any]) -> None: ...

    @abstractmethod
    async def read(
        self, after: int, session: str | None, wait_s: float, limit: int = MAX_PAGE
    ) -> tuple[list[Event], int]:
        """Events with ``seq > after`` (of ``session`` when given), waiting up to ``wait_s``.

        Returns (events, next): ``next`` is the ``after`` of the following call.
        """

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None


def _event(seq: int, at: float, type_: str, detail: dict[str, Any]) -> Event:
    return Event.model_validate(
        {**detail, "seq": seq, "at": dt.datetime.fromtimestamp(at, dt.UTC), "type": type_}
    )


class MemoryEvents(EventLog):
    """One process: a ring of the last ``capacity`` events."""

    def __init__(self, capacity: int = MAX_EVENTS) -> None:
        self._ring: deque[tuple[int, float, str, dict[str, Any]]] = deque(maxlen=capacity)
        self._seq = 0
        self._changed: asyncio.Event | None = None

    def _signal(self) -> asyncio.Event:
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def append(self, type_: str, detail: dict[str, Any]) -> None:
        self._seq += 1
        self._ring.append((self._seq, time.time(), type_, detail))
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _page(self, after: int, session: str | None, limit: int) -> tuple[list[Event], int]:
        out: list[Event] = []
        nxt = max(after, 0)
        for seq, at, type_, detail in self._ring:
            if seq <= after:
                continue
            if len(out) >= limit:
                break
            nxt = seq
            if session is None or detail.get("session") == session:
                out.append(_event(seq, at, type_, detail))
        return out, max(nxt, after)

    async def read(
        self, after: int, session: str | None, wait_s: float, limit: int = MAX_PAGE
    ) -> tuple[list[Event], int]:
        deadline = time.monotonic() + max(wait_s, 0.0)
        while True:
            events, nxt = self._page(after, session, limit)
            left = deadline - time.monotonic()
            if events or left <= 0:
                return events, nxt
            after = nxt
            signal = self._signal()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(signal.wait(), left)


# KEYS[1] = counter hash, KEYS[2] = stream; ARGV = maxlen, payload -> seq
_APPEND = """
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '0-' .. seq, 'e', ARGV[2])
return seq
"""


class RedisEvents(EventLog):
    """Every replica: one Redis stream, ``seq`` from one counter (see the module doc)."""

    def __init__(
        self,
        redis: Any,
        prefix: str = "airlock:",
        capacity: int = MAX_EVENTS,
        sealer: Sealer | None = None,
    ) -> None:
        self._redis = redis
        self._sealer = sealer
        self._counter = f"{prefix}events:meta"
        self._stream = f"{prefix}events"
        self._capacity = capacity
        self._queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue(maxsize=10_000)
        self._task: asyncio.Task[None] | None = None
        self._script: Any = None

    async def start(self) -> None:
        self._script = self._redis.register_script(_APPEND)
        self._task = asyncio.create_task(self._drain(), name="airlock-events")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def append(self, type_: str, detail: dict[str, Any]) -> None:
        try:
            self._queue.put_nowait((type_, {**detail, "_at": time.time()}))
        except asyncio.QueueFull:
            log.warning("event queue full: dropped a %s event", type_)

    async def _drain(self) -> None:
        while True:
            type_, detail = await self._queue.get()
            text = json.dumps({"type": type_, **detail}, default=str)
            payload: bytes | str = (
                self._sealer.seal(self._stream, text.encode()) if self._sealer else text
            )
            for attempt in range(5):
                try:
                    await self._script(
                        keys=[self._counter, self._stream], args=[self._capacity, payload]
                    )
                    break
                except Exception as exc:  # Redis down: retry a little, then drop
                    log.warning("event append failed (%s), attempt %d", type(exc).__name__, attempt)
                    await asyncio.sleep(0.2 * (attempt + 1))

    def _decode(self, entries: list[Any], session: str | None) -> tuple[list[Event], int]:
        out: list[Event] = []
        nxt = 0
        for entry_id, fields in entries:
            eid = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
            seq = int(eid.split("-", 1)[1])
            nxt = max(nxt, seq)
            raw = fields.get(b"e") or fields.get("e")
            if self._sealer is not None:
                try:
                    raw = self._sealer.open(self._stream, bytes(raw))
                except SealError:
                    log.warning("event %s does not open with this replica's keys: skipped", seq)
                    continue
            data: dict[str, Any] = json.loads(raw)
            type_ = str(data.pop("type"))
            at = float(data.pop("_at", time.time()))
            if session is None or data.get("session") == session:
                out.append(_event(seq, at, type_, data))
        return out, nxt

    async def read(
        self, after: int, session: str | None, wait_s: float, limit: int = MAX_PAGE
    ) -> tuple[list[Event], int]:
        # Imported here, like the Redis store: a proxy on the memory store never loads the
        # redis client (its asyncio half needs async_timeout on Pythons before 3.11.3).
        from redis.exceptions import RedisError

        try:
            return await self._read(after, session, wait_s, limit)
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"redis: {type(exc).__name__}") from None

    async def _read(
        self, after: int, session: str | None, wait_s: float, limit: int
    ) -> tuple[list[Event], int]:
        deadline = time.monotonic() + max(wait_s, 0.0)
        after = max(after, 0)
        while True:
            entries = await self._redis.xrange(self._stream, min=f"(0-{after}", count=limit)
            events, nxt = self._decode(entries, session)
            nxt = max(nxt, after)
            left = deadline - time.monotonic()
            if events or left <= 0:
                return events, nxt
            after = nxt
            block_ms = max(1, int(min(left, 5.0) * 1000))
            await self._redis.xread({self._stream: f"0-{after}"}, count=1, block=block_ms)


class EventTap:
    """Given every audit write; appends the events they stand for."""

    def __init__(self, log_: EventLog) -> None:
        self.log = log_
        self._limit_seen: dict[tuple[str, str], float] = {}

    def __call__(self, event: str, fields: dict[str, Any]) -> None:
        mapped = map_audit(event, fields)
        if mapped is None:
            return
        type_, detail = mapped
        if type_ == "limit":
            key = (str(detail.get("session")), str(detail.get("reason")))
            now = time.monotonic()
            if now - self._limit_seen.get(key, -10.0) < 1.0:
                return
            if len(self._limit_seen) > 10_000:
                self._limit_seen.clear()
            self._limit_seen[key] = now
        self.log.append(type_, detail)


class TappedAudit(AuditLog):
    """The audit log, with every write also offered to ``taps`` (the event tap)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.taps: list[Callable[[str, dict[str, Any]], None]] = []

    def write(self, event: str, **fields: Any) -> None:
        super().write(event, **fields)
        for tap in self.taps:
            try:
                tap(event, fields)
            except Exception:  # an event must never break the request path
                log.exception("event tap failed for %s", event)
