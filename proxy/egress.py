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

from .config import ProxyConfig
from .hosts import IPAddress, any_match, parse_ip, refused_address, unmap
from .store.base import SessionRecord

_WILDCARD = {"0.0.0.0", "::", ""}


def is_local_address(ip: IPAddress) -> bool:
    """True when ``ip`` belongs to this machine (so a listener on 0.0.0.0/:: gets it).

    Binding a socket to an address succeeds only for the host's own addresses
    (and the unspecified address): the kernel answers, nothing is sent.
    """
    ip = unmap(ip)
    if ip.is_loopback or ip.is_unspecified:
        return True
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((str(ip), 0))
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class Allowed:
    pinned: tuple[str, int]
    intercept: bool


@dataclass(frozen=True)
class Refused:
    status: int
    reason: str
    message: str


def _own_endpoints(config: ProxyConfig) -> list[tuple[IPAddress | None, int]]:
    """The proxy's own listeners as (address or None for "every local address", port)."""
    listeners = [(config.listen_host, config.listen_port)]
    if config.control.kind == "tcp":
        listeners.append((config.control.host, config.control.port))
    out: list[tuple[IPAddress | None, int]] = []
    for host, port in listeners:
        if host.strip("[]") in _WILDCARD:
            out.append((None, port))
            continue
        ip = parse_ip(host)
        if ip is not None:
            out.append((unmap(ip), port))
            continue
        try:  # a listen *name* (localhost): every address it binds to
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            out.append((None, port))  # cannot tell: be conservative
            continue
        for info in infos:
            resolved = parse_ip(str(info[4][0]))
            out.append((unmap(resolved) if resolved is not None else None, port))
    return out


class Egress:
    def __init__(self, config: ProxyConfig) -> None:
        self._config = config
        self._own = _own_endpoints(config)

    def is_own(self, addr: tuple[str, int]) -> bool:
        """Socket-address comparison with the proxy's own listeners.

        ``[::ffff:127.0.0.1]:P`` is ``127.0.0.1:P``; a listener on ``0.0.0.0``
        or ``::`` owns that port on every local address.
        """
        ip = parse_ip(addr[0])
        if ip is None:
            return False
        ip = unmap(ip)
        for own_ip, port in self._own:
            if port != addr[1]:
                continue
            if own_ip is None:
                if is_local_address(ip):
                    return True
            elif own_ip == ip or ip.is_unspecified:
                # Connecting to 0.0.0.0 / :: reaches the local host.
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

    async def decide(
        self, session: SessionRecord, host: str, port: int, *, tunnel: bool = True
    ) -> Allowed | Refused:
        """Allow-lists, then (plain http) the intercept set, then addresses.

        Every check that needs no DNS comes first: plain http to an
        intercepted host is refused before its name is ever looked up.
        """
        if not (any_match(host, self._config.allow) or any_match(host, session.allow)):
            return Refused(403, "host_not_allowed", f"{host} is not in the allow list")
        intercept = host in self._config.intercept
        if intercept and not tunnel:
            return Refused(
                403,
                "plain_http_intercepted",
                f"{host} is only reachable over https; use https://{host}/",
            )
        mapped = self._config.resolve.get((host, port))
        if mapped is not None:
            if self.is_own(mapped):
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
            if self.is_own((addr, port)):
                return Refused(
                    403, "control_api", "the proxy's own endpoints are not a destination"
                )
            if why is not None:
                return Refused(403, "destination_refused", f"{host} resolves to a {why} address")
        return Allowed(pinned=(addresses[0], port), intercept=intercept)
