"""Host patterns and destination address classes for the egress policy."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud metadata endpoints, refused even if someone made them "global".
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200")
)


def host_matches(host: str, pattern: str) -> bool:
    """``*`` matches anything, ``*.d`` matches strict subdomains of d, else equality."""
    if pattern == "*":
        return True
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    return host == pattern


def any_match(host: str, patterns: Iterable[str]) -> bool:
    return any(host_matches(host, p) for p in patterns)


def parse_ip(value: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(value.strip("[]"))
    except ValueError:
        return None


# IPv6 ranges that carry an IPv4 address in their low 32 bits: whoever routes
# them (the kernel, a NAT64 gateway, a SIIT translator) delivers to that IPv4
# address, so it is the IPv4 address that must be public.
_EMBED_LOW32 = (
    ipaddress.ip_network("::ffff:0:0/96"),  # IPv4-mapped
    ipaddress.ip_network("::ffff:0:0:0/96"),  # IPv4-translated (SIIT)
    ipaddress.ip_network("::/96"),  # IPv4-compatible (deprecated)
    ipaddress.ip_network("64:ff9b::/96"),  # NAT64 well-known prefix
)
# Local-use NAT64 (RFC 8215): the operator's own translator, whose embedding
# depends on its prefix length; nothing public lives here.
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_TEREDO = ipaddress.ip_network("2001::/32")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")
_UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to (mapped, compatible, NAT64,
    6to4, Teredo server and client); empty for a plain IPv6 address."""
    out: list[ipaddress.IPv4Address] = []
    value = int(ip)
    # :: and ::1 (inside ::/96) are themselves, not 0.0.0.0 and 0.0.0.1.
    if value not in (0, 1) and any(ip in net for net in _EMBED_LOW32):
        out.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if ip in _SIX_TO_FOUR and ip.sixtofour is not None:
        out.append(ip.sixtofour)
    if ip in _TEREDO and ip.teredo is not None:
        out.extend(ip.teredo)
    return out


def _class_reason(ip: IPAddress) -> str | None:
    """The refused classes ``ipaddress`` knows for both families, most specific first."""
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_multicast:
        return "multicast"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "non-global"
    return None


def _v4_reason(ip: ipaddress.IPv4Address) -> str | None:
    if ip in METADATA_ADDRESSES:
        return "metadata"
    return _class_reason(ip)


def refused_address(ip: IPAddress) -> str | None:
    """Why a destination address is refused, or None for a public address.

    ``ipaddress`` semantics, plus what they leave out: an IPv6 address that
    embeds an IPv4 address (mapped, compatible, SIIT, NAT64, 6to4, Teredo) is
    judged by that IPv4 address too, and site-local, unique-local and
    local-use NAT64 ranges are refused by name.
    """
    ip = unmap(ip)  # ::ffff:a.b.c.d *is* a.b.c.d
    if isinstance(ip, ipaddress.IPv4Address):
        return _v4_reason(ip)
    for v4 in embedded_ipv4(ip):
        why = _v4_reason(v4)
        if why is not None:
            return f"{why} (embedded in IPv6)"
    if ip in METADATA_ADDRESSES:
        return "metadata"
    if ip in _NAT64_LOCAL:
        return "local-use NAT64"
    if ip in _SITE_LOCAL:
        return "site-local"
    if ip in _UNIQUE_LOCAL:
        return "unique-local"
    return _class_reason(ip)


def unmap(ip: IPAddress) -> IPAddress:
    """``::ffff:a.b.c.d`` is the same socket address as ``a.b.c.d``."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip
