"""Redis store: what lets several proxy replicas share sessions and leases.

Key layout (``prefix`` defaults to ``airlock:``), every key with a Redis expiry
(PX) equal to its record's lifetime so an orchestrator that dies leaves nothing
live behind:

- ``s:{sid}``         session JSON (secret hash, allow patterns, expires_at)
- ``sl:{sid}``        set of the session's lease ids
- ``l:{sid}:{lid}``   lease JSON, including the real tokens
- ``ph:{placeholder}`` owner of a placeholder: session, lease and its rules
- ``live:s``, ``live:l`` sorted sets of session ids and ``{sid}:{lid}`` lease
  names scored by their ``expires_at``: what ``/metrics`` counts. A scrape is
  one round trip (``ZREMRANGEBYSCORE`` of what expired, ``ZCARD``), never a
  ``SCAN``; every replica sees the same numbers, and an entry whose record
  Redis expired on its own (no replica alive to remove it) stops counting
  when its score passes.

The per-request lookup is a single ``MGET s:{sid} ph:{...}``. Any Redis error
becomes :class:`StoreUnavailable`, so the proxy fails closed.

With a :class:`~airlock.proxy.store.crypto.Sealer` (``--store-key-file``) every
value is AES-GCM sealed, bound to its key name; a value that does not open
(wrong key, tampered, plaintext where a sealed value belongs) is
:class:`StoreUnavailable` too. Without one (``--store-plaintext``) values are
JSON, and a sealed value is refused the same way.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError, WatchError

from .base import (
    LeaseRecord,
    PlaceholderEntry,
    PlaceholderInUse,
    SessionRecord,
    Store,
    StoreUnavailable,
    now,
)
from .crypto import MAGIC, Sealer, SealError

T = TypeVar("T")

# SET NX and its entry in the live index, as one step (see counts()).
_CREATE_SESSION = """
if redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
  return 1
end
return 0
"""


def _px(expires_at: float) -> int:
    return max(1, math.ceil((expires_at - now()) * 1000))


class RedisStore(Store):
    kind = "redis"

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "airlock:",
        timeout_s: float = 1.0,
        sealer: Sealer | None = None,
    ) -> None:
        self._prefix = prefix
        self._sealer = sealer
        self._redis: Any = aioredis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry_on_timeout=False,
            health_check_interval=30,
        )

    def _s(self, sid: str) -> str:
        return f"{self._prefix}s:{sid}"

    def _sl(self, sid: str) -> str:
        return f"{self._prefix}sl:{sid}"

    def _l(self, sid: str, lid: str) -> str:
        return f"{self._prefix}l:{sid}:{lid}"

    def _ph(self, placeholder: str) -> str:
        return f"{self._prefix}ph:{placeholder}"

    @property
    def _live_s(self) -> str:
        return f"{self._prefix}live:s"

    @property
    def _live_l(self) -> str:
        return f"{self._prefix}live:l"

    def _seal(self, name: str, text: str) -> bytes | str:
        if self._sealer is None:
            return text
        return self._sealer.seal(name, text.encode())

    def _open(self, name: str, raw: bytes | str) -> bytes:
        value = raw.encode() if isinstance(raw, str) else bytes(raw)
        try:
            if self._sealer is None:
                if value.startswith(MAGIC):
                    raise SealError("sealed value but no --store-key-file")
                return value
            return self._sealer.open(name, value)
        except SealError as exc:
            raise StoreUnavailable(f"redis: {name.split(':')[1]}: {exc}") from None

    async def _call(self, fn: Callable[[], Awaitable[T]]) -> T:
        try:
            return await fn()
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"redis: {type(exc).__name__}") from None

    async def ping(self) -> None:
        await self._call(self._redis.ping)

    async def close(self) -> None:
        with contextlib.suppress(RedisError, OSError):
            await self._redis.aclose()

    async def create_session(self, record: SessionRecord) -> bool:
        async def op() -> bool:
            ok = await self._redis.eval(
                _CREATE_SESSION,
                2,
                self._s(record.session_id),
                self._live_s,
                self._seal(self._s(record.session_id), record.to_json()),
                _px(record.expires_at),
                repr(record.expires_at),
                record.session_id,
            )
            return bool(ok)

        return await self._call(op)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        raw = await self._call(lambda: self._redis.get(self._s(session_id)))
        if raw is None:
            return None
        record = SessionRecord.from_json(self._open(self._s(session_id), raw))
        return record if record.live() else None

    async def get_sessions(self, session_ids: Sequence[str]) -> dict[str, SessionRecord]:
        ids = list(session_ids)
        if not ids:
            return {}
        raws = await self._call(lambda: self._redis.mget([self._s(s) for s in ids]))
        at = now()
        out: dict[str, SessionRecord] = {}
        for sid, raw in zip(ids, raws, strict=True):
            if raw is not None:
                record = SessionRecord.from_json(self._open(self._s(sid), raw))
                if record.live(at):
                    out[sid] = record
        return out

    async def _lease(self, sid: str, lid: str) -> LeaseRecord | None:
        raw = await self._call(lambda: self._redis.get(self._l(sid, lid)))
        return (
            LeaseRecord.from_json(self._open(self._l(sid, lid), raw)) if raw is not None else None
        )

    async def _remove_lease(self, lease: LeaseRecord) -> None:
        async def op() -> None:
            pipe = self._redis.pipeline(transaction=True)
            pipe.delete(self._l(lease.session_id, lease.lease_id))
            pipe.srem(self._sl(lease.session_id), lease.lease_id)
            pipe.zrem(self._live_l, f"{lease.session_id}:{lease.lease_id}")
            for ph in lease.placeholders:
                pipe.delete(self._ph(ph))
            await pipe.execute()

        await self._call(op)

    async def delete_session(self, session_id: str) -> tuple[bool, list[str]]:
        existed = await self.get_session(session_id) is not None
        lids = await self._call(lambda: self._redis.smembers(self._sl(session_id)))
        removed: list[str] = []
        for raw_lid in lids:
            lid = raw_lid.decode() if isinstance(raw_lid, bytes) else str(raw_lid)
            lease = await self._lease(session_id, lid)
            if lease is not None:
                await self._remove_lease(lease)
                if lease.live():
                    removed.append(lid)

        async def op() -> None:
            pipe = self._redis.pipeline(transaction=True)
            pipe.delete(self._s(session_id), self._sl(session_id))
            pipe.zrem(self._live_s, session_id)
            await pipe.execute()

        await self._call(op)
        return existed, sorted(removed)

    async def put_lease(self, record: LeaseRecord) -> bool:
        """Check-and-set under WATCH: two replicas cannot both bind a placeholder."""
        phs = sorted(record.placeholders)
        ph_keys = [self._ph(p) for p in phs]
        lease_key = self._l(record.session_id, record.lease_id)
        session = await self.get_session(record.session_id)
        session_px = _px(session.expires_at) if session is not None else _px(record.expires_at)

        async def op() -> bool:
            for _ in range(16):
                async with self._redis.pipeline(transaction=True) as pipe:
                    try:
                        await pipe.watch(lease_key, *ph_keys)
                        owners = await pipe.mget(ph_keys)
                        raw_old = await pipe.get(lease_key)
                        at = now()
                        for ph, raw in zip(phs, owners, strict=True):
                            if raw is None:
                                continue
                            entry = PlaceholderEntry.from_json(self._open(self._ph(ph), raw))
                            if entry.live(at) and (entry.session_id, entry.lease_id) != (
                                record.session_id,
                                record.lease_id,
                            ):
                                raise PlaceholderInUse(ph)
                        old = (
                            LeaseRecord.from_json(self._open(lease_key, raw_old))
                            if raw_old is not None
                            else None
                        )
                        pipe.multi()
                        if old is not None:
                            for ph in old.placeholders - record.placeholders:
                                pipe.delete(self._ph(ph))
                        px = _px(record.expires_at)
                        pipe.set(lease_key, self._seal(lease_key, record.to_json()), px=px)
                        for ph in phs:
                            entry_json = record.entry_for(ph).to_json()
                            pipe.set(self._ph(ph), self._seal(self._ph(ph), entry_json), px=px)
                        pipe.sadd(self._sl(record.session_id), record.lease_id)
                        pipe.zadd(
                            self._live_l,
                            {f"{record.session_id}:{record.lease_id}": record.expires_at},
                        )
                        pipe.pexpire(self._sl(record.session_id), max(session_px, px))
                        await pipe.execute()
                    except WatchError:
                        continue
                    return old is not None and old.live(at)
            raise StoreUnavailable("redis: lease update kept conflicting")

        return await self._call(op)

    async def delete_lease(self, session_id: str, lease_id: str) -> bool:
        lease = await self._lease(session_id, lease_id)
        if lease is None:
            await self._call(lambda: self._redis.srem(self._sl(session_id), lease_id))
            return False
        await self._remove_lease(lease)
        return lease.live()

    async def list_leases(self, session_id: str) -> list[LeaseRecord]:
        lids = await self._call(lambda: self._redis.smembers(self._sl(session_id)))
        if not lids:
            return []
        names = sorted(x.decode() if isinstance(x, bytes) else str(x) for x in lids)
        keys = [self._l(session_id, n) for n in names]
        raws = await self._call(lambda: self._redis.mget(keys))
        at = now()
        out = [
            LeaseRecord.from_json(self._open(k, r))
            for k, r in zip(keys, raws, strict=True)
            if r is not None
        ]
        return [lease for lease in out if lease.live(at)]

    async def lookup(
        self, session_id: str, placeholders: Sequence[str]
    ) -> tuple[SessionRecord | None, dict[str, PlaceholderEntry]]:
        keys = [self._s(session_id), *(self._ph(p) for p in placeholders)]
        raws = await self._call(lambda: self._redis.mget(keys))
        at = now()
        session = (
            SessionRecord.from_json(self._open(keys[0], raws[0])) if raws[0] is not None else None
        )
        if session is not None and not session.live(at):
            session = None
        found: dict[str, PlaceholderEntry] = {}
        for ph, key, raw in zip(placeholders, keys[1:], raws[1:], strict=True):
            if raw is not None:
                entry = PlaceholderEntry.from_json(self._open(key, raw))
                if entry.live(at):
                    found[ph] = entry
        return session, found

    async def counts(self) -> tuple[int, int]:
        """One round trip: forget what expired, count what is left (never a SCAN)."""

        async def op() -> tuple[int, int]:
            at = now()
            pipe = self._redis.pipeline(transaction=False)
            pipe.zremrangebyscore(self._live_s, "-inf", at)
            pipe.zcard(self._live_s)
            pipe.zremrangebyscore(self._live_l, "-inf", at)
            pipe.zcard(self._live_l)
            _, sessions, _, leases = await pipe.execute()
            return int(sessions), int(leases)

        return await self._call(op)

    async def expire_session(self, session_id: str, expires_at: float) -> bool:
        raw = await self._call(lambda: self._redis.get(self._s(session_id)))
        if raw is None:
            return True
        record = SessionRecord.from_json(self._open(self._s(session_id), raw))
        if record.expires_at == expires_at and not record.live():
            await self.delete_session(session_id)
            return True
        return False

    async def expire_lease(self, session_id: str, lease_id: str, expires_at: float) -> bool:
        lease = await self._lease(session_id, lease_id)
        if lease is None:
            return True
        if lease.expires_at == expires_at and not lease.live():
            await self._remove_lease(lease)
            return True
        return False
