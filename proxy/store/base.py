"""The store interface: sessions, leases and the placeholder index.

Two implementations share it: :mod:`.memory` (one process) and :mod:`.redis`
(several replicas). The proxy's hot path is :meth:`Store.lookup`, which must be
one cheap operation (a dict probe, or one Redis ``MGET``) per request.

Every method may raise :class:`StoreUnavailable`; callers fail closed on it.
Times are Unix epoch seconds (wall clock) so replicas agree on expiry.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from ..protocol import LeaseRule


class StoreUnavailable(Exception):
    """The backing store cannot be reached: refuse, never guess."""


class PlaceholderInUse(Exception):
    """A placeholder is already bound to another live lease."""


def hash_secret(secret: str) -> str:
    """Stores keep only a hash of a session's proxy secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


# What "now" is for expiry: Unix epoch seconds. Production always uses :func:`now`;
# tests hand a store, the expiry watcher and the context one clock they move.
Clock = Callable[[], float]


def now() -> float:
    return time.time()


def new_generation() -> str:
    return secrets.token_hex(8)


@dataclass(frozen=True)
class SessionRecord:
    """A sandbox's session. ``generation`` is drawn when the session is created
    (with its secret): tunnels remember it, so a deleted and re-created session
    with the same id never matches an old tunnel."""

    session_id: str
    secret_hash: str
    allow: tuple[str, ...]
    expires_at: float
    generation: str = field(default_factory=new_generation)

    def check_secret(self, secret: str) -> bool:
        return hmac.compare_digest(self.secret_hash, hash_secret(secret))

    def live(self, at: float | None = None) -> bool:
        return self.expires_at > (now() if at is None else at)

    def to_json(self) -> str:
        return json.dumps(
            {
                "session_id": self.session_id,
                "secret_hash": self.secret_hash,
                "allow": list(self.allow),
                "expires_at": self.expires_at,
                "generation": self.generation,
            }
        )

    @classmethod
    def from_json(cls, raw: str | bytes) -> SessionRecord:
        data: dict[str, Any] = json.loads(raw)
        return cls(
            session_id=str(data["session_id"]),
            secret_hash=str(data["secret_hash"]),
            allow=tuple(str(p) for p in data["allow"]),
            expires_at=float(data["expires_at"]),
            # Records written before generations existed: the secret hash is
            # just as unique per created session.
            generation=str(data.get("generation") or data["secret_hash"][:16]),
        )


def _lease_fields(raw: str | bytes) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(raw)
    return {
        "session_id": str(data["session_id"]),
        "lease_id": str(data["lease_id"]),
        "expires_at": float(data["expires_at"]),
        "rules": tuple(LeaseRule.model_validate(r) for r in data["rules"]),
        "trace_id": str(data["trace_id"]) if data.get("trace_id") else None,
    }


class _StoredLease:
    """What a lease and its per-placeholder index entries share: liveness and
    one stored JSON form. A plain mixin, not a dataclass: each subclass keeps
    its own field order (callers construct them positionally)."""

    session_id: str
    lease_id: str
    expires_at: float
    rules: tuple[LeaseRule, ...]
    trace_id: str | None

    def live(self, at: float | None = None) -> bool:
        return self.expires_at > (now() if at is None else at)

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "session_id": self.session_id,
            "lease_id": self.lease_id,
            "expires_at": self.expires_at,
            "rules": [r.model_dump(mode="json") for r in self.rules],
        }
        if self.trace_id is not None:
            data["trace_id"] = self.trace_id
        return json.dumps(data)

    @classmethod
    def from_json(cls, raw: str | bytes) -> Self:
        return cls(**_lease_fields(raw))


@dataclass(frozen=True)
class LeaseRecord(_StoredLease):
    """``trace_id``: the W3C trace of the request that installed the lease (never a
    secret); the swap audit lines of the lease carry it."""

    session_id: str
    lease_id: str
    rules: tuple[LeaseRule, ...]
    expires_at: float
    trace_id: str | None = None

    @property
    def hosts(self) -> list[str]:
        return sorted({rule.host for rule in self.rules})

    @property
    def placeholders(self) -> set[str]:
        return {rule.placeholder for rule in self.rules}

    def entry_for(self, placeholder: str) -> PlaceholderEntry:
        return PlaceholderEntry(
            session_id=self.session_id,
            lease_id=self.lease_id,
            expires_at=self.expires_at,
            rules=tuple(r for r in self.rules if r.placeholder == placeholder),
            trace_id=self.trace_id,
        )


@dataclass(frozen=True)
class PlaceholderEntry(_StoredLease):
    """Who owns a placeholder, and the rules of that lease that use it."""

    session_id: str
    lease_id: str
    expires_at: float
    rules: tuple[LeaseRule, ...]
    trace_id: str | None = None


class Store(ABC):
    """Sessions, leases and the placeholder index, with expiry."""

    kind: str = "abstract"
    # The clock expiry is judged by (Redis judges its own PX expiries by its clock).
    clock: Clock = staticmethod(now)

    @abstractmethod
    async def ping(self) -> None:
        """Raise :class:`StoreUnavailable` when the store cannot serve."""

    @abstractmethod
    async def create_session(self, record: SessionRecord) -> bool:
        """Insert; False when a live session with that id exists."""

    @abstractmethod
    async def get_session(self, session_id: str) -> SessionRecord | None: ...

    async def get_sessions(self, session_ids: Sequence[str]) -> dict[str, SessionRecord]:
        """Live sessions among ``session_ids`` (the reaper's periodic check)."""
        out: dict[str, SessionRecord] = {}
        for sid in session_ids:
            record = await self.get_session(sid)
            if record is not None:
                out[sid] = record
        return out

    @abstractmethod
    async def delete_session(self, session_id: str) -> tuple[bool, list[str]]:
        """Remove the session and its leases; (existed, removed lease ids)."""

    @abstractmethod
    async def put_lease(self, record: LeaseRecord) -> bool:
        """Insert or replace; True when it replaced a live lease.

        Raises :class:`PlaceholderInUse` when a placeholder belongs to another
        live lease.
        """

    @abstractmethod
    async def delete_lease(self, session_id: str, lease_id: str) -> bool: ...

    @abstractmethod
    async def list_leases(self, session_id: str) -> list[LeaseRecord]: ...

    @abstractmethod
    async def lookup(
        self, session_id: str, placeholders: Sequence[str]
    ) -> tuple[SessionRecord | None, dict[str, PlaceholderEntry]]:
        """The hot path: the session and the live owners of ``placeholders``."""

    @abstractmethod
    async def counts(self) -> tuple[int, int]:
        """(live sessions, live leases), for metrics."""

    @abstractmethod
    async def expire_session(self, session_id: str, expires_at: float) -> bool:
        """Drop the session if it is still the one expiring at ``expires_at``.

        True when it is gone because of that expiry (for the audit log).
        """

    @abstractmethod
    async def expire_lease(self, session_id: str, lease_id: str, expires_at: float) -> bool:
        """As :meth:`expire_session`, for a lease."""

    async def close(self) -> None:
        return None
