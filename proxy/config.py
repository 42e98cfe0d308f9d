"""airlock-proxy configuration: parsed once from the command line, then frozen.

Parsing lives here (not in ``cli``) so tests and the harness can build a config
without going through argparse.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .protocol import is_valid_hostname, normalize_host

DEFAULT_INTERCEPT = ("github.com", "api.github.com", "vercel.com", "api.vercel.com")


class ConfigError(ValueError):
    """A command-line value is malformed; the message names the flag."""


@dataclass(frozen=True)
class ControlEndpoint:
    """Where the control API listens: a Unix socket path or a TCP address."""

    kind: Literal["unix", "tcp"]
    path: Path | None = None
    host: str = ""
    port: int = 0

    def describe(self) -> str:
        if self.kind == "unix":
            return f"unix:{self.path}"
        return f"tcp://{self.host}:{self.port}"


@dataclass(frozen=True)
class ProxyConfig:
    listen_host: str
    listen_port: int
    control: ControlEndpoint
    state_dir: Path
    store_url: str = "memory"
    control_token: str | None = None
    intercept: frozenset[str] = frozenset(DEFAULT_INTERCEPT)
    allow: tuple[str, ...] = ()
    resolve: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    upstream_ca: Path | None = None
    audit_log: Path | None = None
    advertise: str | None = None
    # Re-read on SIGHUP (the token itself is ``control_token`` at start).
    control_token_file: Path | None = None
    # Redis at rest: AES-GCM key file, or an explicit choice of plaintext.
    store_key_file: Path | None = None
    store_plaintext: bool = False
    # Limits (see docs/proxy.md, "Limits").
    max_head_bytes: int = 64 * 1024
    head_timeout_s: float = 10.0
    idle_timeout_s: float = 300.0
    max_session_connections: int = 128
    session_rate: float = 500.0
    session_burst: int = 1000
    session_check_s: float = 1.0
    # Connections that have not proven a session (see addons/auth.py).
    max_unauthenticated_connections: int = 64
    unauthenticated_timeout_s: float = 5.0
    # Requests, new HTTP/2 streams and resets one connection may send a second
    # (see addons/limits.py); over it the proxy stops reading that connection.
    connection_rate: float = 200.0
    connection_burst: int = 400
    # Refusals of unauthenticated or rate-limited traffic written per reason and minute.
    refusal_audit_per_minute: int = 60
    # Compression bombs (decoders.DecodeBudget): a streamed body is cut
    # (``decoded_too_large``) once it decodes past this many bytes, or to more
    # than this many times its encoded size, sustained.
    max_decoded_bytes: int = 1 << 30
    max_decode_ratio: int = 100
    # Least privilege per command (docs/proxy.md, "Lease scopes").
    on_exfiltration: Literal["revoke", "refuse"] = "revoke"
    github_app_id: str | None = None
    github_app_key_file: Path | None = None
    github_api_url: str = "https://api.github.com"

    @property
    def audit_path(self) -> Path:
        return self.audit_log or self.state_dir / "audit.log"

    @property
    def advertised(self) -> str:
        """host:port that sandboxes use in their proxy URL."""
        if self.advertise:
            return self.advertise
        host = self.listen_host
        if host in {"0.0.0.0", "::", ""}:
            host = os.uname().nodename
        if ":" in host:
            host = f"[{host}]"
        return f"{host}:{self.listen_port}"


def _split_host_port(value: str, flag: str) -> tuple[str, int]:
    if value.startswith("["):
        host, sep, rest = value[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ConfigError(f"{flag}: expected [ADDR]:PORT, got {value!r}")
        port_s = rest[1:]
    else:
        host, sep, port_s = value.rpartition(":")
        if not sep:
            raise ConfigError(f"{flag}: expected HOST:PORT, got {value!r}")
    try:
        port = int(port_s)
    except ValueError:
        raise ConfigError(f"{flag}: bad port in {value!r}") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"{flag}: port out of range in {value!r}")
    return host, port


def read_control_token(path: Path) -> str:
    """The bearer token in ``--control-token-file`` (at start and on SIGHUP)."""
    token = path.read_text().strip()
    if not token:
        raise ConfigError("--control-token-file is empty")
    return token


def parse_listen(value: str) -> tuple[str, int]:
    return _split_host_port(value, "--listen")


def parse_control(value: str, base: Path | None = None) -> ControlEndpoint:
    """``unix:PATH`` (relative to ``base``), ``tcp://HOST:PORT`` or a bare path."""
    if value.startswith("tcp://"):
        host, port = _split_host_port(value[len("tcp://") :], "--control")
        return ControlEndpoint(kind="tcp", host=host, port=port)
    raw = value[len("unix:") :] if value.startswith("unix:") else value
    if raw.startswith("//"):
        raw = raw[1:]
    if not raw:
        raise ConfigError("--control: empty socket path")
    path = Path(raw)
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    return ControlEndpoint(kind="unix", path=path)


def parse_resolve(value: str) -> tuple[tuple[str, int], tuple[str, int]]:
    """curl-style ``HOST:PORT:ADDR[:ADDR_PORT]``; ADDR must be an IP literal."""
    host, sep, rest = value.partition(":")
    port_s, sep2, rest = rest.partition(":")
    if not (sep and sep2 and rest):
        raise ConfigError(f"--resolve: expected HOST:PORT:ADDR[:ADDR_PORT], got {value!r}")
    addr_port_s = ""
    if rest.startswith("["):
        addr, close, tail = rest[1:].partition("]")
        if not close:
            raise ConfigError(f"--resolve: unterminated [ in {value!r}")
        if tail:
            if not tail.startswith(":"):
                raise ConfigError(f"--resolve: bad address in {value!r}")
            addr_port_s = tail[1:]
    elif rest.count(":") == 1:
        addr, _, addr_port_s = rest.partition(":")
    else:
        addr = rest
    try:
        ip = ipaddress.ip_address(addr)
        port = int(port_s)
        addr_port = int(addr_port_s) if addr_port_s else port
    except ValueError:
        raise ConfigError(
            f"--resolve: ADDR must be an IP address and ports numbers: {value!r}"
        ) from None
    host = normalize_host(host)
    if not is_valid_hostname(host):
        raise ConfigError(f"--resolve: bad host name in {value!r}")
    return (host, port), (str(ip), addr_port)


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def parse_intercept(values: list[str] | None) -> frozenset[str]:
    hosts = values or list(DEFAULT_INTERCEPT)
    out: set[str] = set()
    for value in hosts:
        host = normalize_host(value)
        if not is_valid_hostname(host) or _is_ip(host):
            raise ConfigError(f"--intercept: not a DNS host name: {value!r}")
        out.add(host)
    return frozenset(out)


def parse_allow(values: list[str] | None) -> tuple[str, ...]:
    out: list[str] = []
    for value in values or []:
        pattern = normalize_host(value)
        bare = pattern[2:] if pattern.startswith("*.") else pattern
        if pattern != "*" and not is_valid_hostname(bare):
            raise ConfigError(f"--allow: expected HOST, *.DOMAIN or *: {value!r}")
        out.append(pattern)
    return tuple(out)
