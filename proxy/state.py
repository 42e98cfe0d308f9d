"""Per-connection decisions shared by the addons, and the power to end a connection.

The egress decision is made once per destination (at CONNECT, or per plain-http
request) and remembered here, keyed by mitmproxy's client connection id:
who the client authenticated as (session id *and* generation), which host it
may reach, and the address that host was pinned to. ``server_connect`` dials
only pinned addresses, so a DNS answer cannot change between the check and the
connection.

A session's generation is fixed when it is created; a tunnel remembers the
generation it was opened under. Deleting a session closes every connection
that holds it (:meth:`Connections.close_session`), and a re-created session
with the same id has another generation, so an old tunnel that somehow
survived still fails its per-request check.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("airlock.proxy.state")

Killer = Callable[[str, str], None]  # (client connection id, reason)


@dataclass
class Tunnel:
    """A CONNECT tunnel the policy accepted."""

    session_id: str
    host: str
    port: int
    intercept: bool
    generation: str = ""
    opened_at: float = field(default_factory=time.monotonic)


@dataclass
class ClientState:
    session_id: str | None = None
    generation: str | None = None
    tunnel: Tunnel | None = None
    # (host, port) the client may reach -> (ip, port) to dial.
    pins: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    # real value -> what the sandbox sent, for scrubbing responses.
    scrub: dict[bytes, bytes] = field(default_factory=dict)
    # Bytes read from / written to the client socket (TLS included).
    bytes_up: int = 0
    bytes_down: int = 0
    # The session this connection counts against (per-session connection cap).
    counted: str | None = None
    closing: str | None = None
    # A request head (CONNECT or request) has arrived on this connection.
    seen_head: bool = False
    # Its HTTP/2 frames are charged to the rate buckets as they are parsed
    # (addons/limits.py), so its HTTP/2 requests are not charged again.
    h2_metered: bool = False
    # Counted in the unauthenticated pool (connected, no session proven yet).
    unauthenticated: bool = False


class Connections:
    def __init__(self) -> None:
        self._clients: dict[str, ClientState] = {}
        # server connection id -> the host:port it was asked for, while we
        # dial the pinned address.
        self._dialing: dict[str, tuple[str, int]] = {}
        self._killer: Killer | None = None
        self._per_session: dict[str, int] = {}
        # Unauthenticated connections, oldest first (dicts keep insertion order).
        self._unauthenticated: dict[str, None] = {}

    def set_killer(self, killer: Killer) -> None:
        """Installed by the app once mitmproxy runs: ends one client connection."""
        self._killer = killer

    def get(self, client_id: str) -> ClientState | None:
        return self._clients.get(client_id)

    def state(self, client_id: str) -> ClientState:
        return self._clients.setdefault(client_id, ClientState())

    def drop(self, client_id: str) -> ClientState | None:
        state = self._clients.pop(client_id, None)
        if state is not None and state.unauthenticated:
            self._unauthenticated.pop(client_id, None)
        if state is not None and state.counted is not None:
            left = self._per_session.get(state.counted, 0) - 1
            if left > 0:
                self._per_session[state.counted] = left
            else:
                self._per_session.pop(state.counted, None)
        return state

    def items(self) -> list[tuple[str, ClientState]]:
        return list(self._clients.items())

    def kill(self, client_id: str, reason: str) -> None:
        """End a client connection and everything it relays (idempotent)."""
        state = self._clients.get(client_id)
        if state is not None:
            if state.closing is not None:
                return
            state.closing = reason
        if self._killer is None:  # pragma: no cover - only before start-up
            log.warning("cannot close connection %s: proxy not running", client_id)
            return
        self._killer(client_id, reason)

    def close_session(self, session_id: str, reason: str, *, keep: str | None = None) -> int:
        """Close every connection of ``session_id`` (except those of generation ``keep``)."""
        victims = [
            cid
            for cid, st in self._clients.items()
            if st.session_id == session_id and (keep is None or st.generation != keep)
        ]
        for cid in victims:
            self.kill(cid, reason)
        return len(victims)

    def live_sessions(self) -> dict[str, set[str]]:
        """session id -> generations held by open connections."""
        out: dict[str, set[str]] = {}
        for st in self._clients.values():
            if st.session_id is not None and st.closing is None:
                out.setdefault(st.session_id, set()).add(st.generation or "")
        return out

    def connected(self, client_id: str) -> int:
        """A client connected: it joins the unauthenticated pool; the pool's size now."""
        state = self.state(client_id)
        if not state.unauthenticated and state.session_id is None:
            state.unauthenticated = True
            self._unauthenticated[client_id] = None
        return len(self._unauthenticated)

    def evict_oldest_unauthenticated(self) -> str | None:
        """Take the connection that waited longest without proving a session out
        of the pool (the caller closes it); None when the pool is empty."""
        for client_id in self._unauthenticated:
            del self._unauthenticated[client_id]
            state = self._clients.get(client_id)
            if state is not None:
                state.unauthenticated = False
            return client_id
        return None

    def authenticated(self, client_id: str, session_id: str, generation: str) -> None:
        """The connection proved a session: it leaves the unauthenticated pool."""
        state = self.state(client_id)
        state.session_id = session_id
        state.generation = generation
        if state.unauthenticated:
            state.unauthenticated = False
            self._unauthenticated.pop(client_id, None)

    def unauthenticated(self) -> int:
        """Open connections that have not proven a session yet."""
        return len(self._unauthenticated)

    def count_for(self, session_id: str) -> int:
        """Open client connections that authenticated as ``session_id``."""
        return self._per_session.get(session_id, 0)

    def admit(self, client_id: str, session_id: str) -> None:
        """Count this connection against its session (once)."""
        state = self.state(client_id)
        if state.counted is None:
            state.counted = session_id
            self._per_session[session_id] = self._per_session.get(session_id, 0) + 1

    def start_dial(self, server_id: str, requested: tuple[str, int]) -> None:
        self._dialing[server_id] = requested

    def end_dial(self, server_id: str) -> tuple[str, int] | None:
        return self._dialing.pop(server_id, None)

    def __len__(self) -> int:
        return len(self._clients)
