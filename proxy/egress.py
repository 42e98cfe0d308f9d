"""The egress decision: may this session reach host:port, and at which address?

Default deny. A host must match an operator ``--allow`` pattern or one of the
session's. The destination is then resolved (an operator ``--resolve`` entry
wins and is trusted as-is); every resolved address must be public, and the
first one is pinned. The proxy's own listener and the control API are never a
destination, whatever the operator mapped.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass

from airlock.proxy.config import ProxyConfig
from airlock.proxy.hosts import any_match, parse_ip, refused_address
from airlock.proxy.store.base import SessionRecord

_WILDCARD = {"0.0.0.0", "::", ""}


@dataclass(frozen=True)
class Allowed:
    pinned: tuple[str, int]
    intercept: bool


@dataclass(frozen=True)
class Refused:
    status: int
    reason: str
    message: str


class Egress:
    def __init__(self, config: ProxyConfig) -> None:
        self._config = config
        self._own: list[tuple[str, int]] = [(config.listen_host, config.listen_port)]
        if config.control.kind == "tcp":
            self._own.append((config.control.host, config.control.port))

    def _is_own(self, addr: tuple[str, int]) -> bool:
        ip = parse_ip(addr[0])
        for host, port in self._own:
            if port != addr[1]:
                continue
            if host in _WILDCARD or host == addr[0]:
                return True
            own_ip = parse_ip(host)
            if own_ip is not None and ip is not None and own_ip == ip:
                return True
            if host == "localhost" and ip is not None and ip.is_loopback:
                return True
        return False

    async def _resolve(self, host: str, port: int) -> list[str]:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        seen: list[str] = []
        for info in infos:
            addr = str(info[4][0])
            if addr not in seen:
                seen.append(addr)
        return seen

    async def decide(self, session: SessionRecord, host: str, port: int) -> Allowed | Refused:
        if not (any_match(host, self._config.allow) or any_match(host, session.allow)):
            return Refused(403, "host_not_allowed", f"{host} is not in the allow list")
        intercept = host in self._config.intercept
        mapped = self._config.resolve.get((host, port))
        if mapped is not None:
            if self._is_own(mapped):
                return Refused(
                    403, "control_api", "the proxy's own endpoints are not a destination"
                )
            return Allowed(pinned=mapped, intercept=intercept)
        literal = parse_ip(host)
        if literal is not None:
            addresses = [str(literal)]
        else:
            try:
                addresses = await self._resolve(host, port)
            except (OSError, UnicodeError):
                return Refused(502, "dns_failed", f"cannot resolve {host}")
            if not addresses:
                return Refused(502, "dns_failed", f"cannot resolve {host}")
        for addr in addresses:
            ip = parse_ip(addr)
            why = refused_address(ip) if ip is not None else "unparsable"
            if self._is_own((addr, port)):
                return Refused(
                    403, "control_api", "the proxy's own endpoints are not a destination"
                )
            if why is not None:
                return Refused(403, "destination_refused", f"{host} resolves to a {why} address")
        return Allowed(pinned=(addresses[0], port), intercept=intercept)
