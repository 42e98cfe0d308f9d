"""Per-connection decisions shared by the addons.

The egress decision is made once per destination (at CONNECT, or per plain-http
request) and remembered here, keyed by mitmproxy's client connection id:
who the client authenticated as, which host it may reach, and the address
that host was pinned to. ``server_connect`` dials only pinned addresses, so a
DNS answer cannot change between the check and the connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Tunnel:
    """A CONNECT tunnel the policy accepted."""

    session_id: str
    host: str
    port: int
    intercept: bool


@dataclass
class ClientState:
    session_id: str | None = None
    tunnel: Tunnel | None = None
    # (host, port) the client may reach -> (ip, port) to dial.
    pins: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    # real value -> what the sandbox sent, for scrubbing responses.
    scrub: dict[bytes, bytes] = field(default_factory=dict)


class Connections:
    def __init__(self) -> None:
        self._clients: dict[str, ClientState] = {}
        # server connection id -> the host:port it was asked for, while we
        # dial the pinned address.
        self._dialing: dict[str, tuple[str, int]] = {}

    def get(self, client_id: str) -> ClientState | None:
        return self._clients.get(client_id)

    def state(self, client_id: str) -> ClientState:
        return self._clients.setdefault(client_id, ClientState())

    def drop(self, client_id: str) -> None:
        self._clients.pop(client_id, None)

    def start_dial(self, server_id: str, requested: tuple[str, int]) -> None:
        self._dialing[server_id] = requested

    def end_dial(self, server_id: str) -> tuple[str, int] | None:
        return self._dialing.pop(server_id, None)

    def __len__(self) -> int:
        return len(self._clients)
