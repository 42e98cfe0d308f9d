"""Small helpers shared by the proxy tests: real clients, lease rules."""

from __future__ import annotations

import asyncio
import base64
import ssl
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airlock.proxy.audit import AuditLog
from airlock.proxy.config import ControlEndpoint, ProxyConfig
from airlock.proxy.context import ProxyContext
from airlock.proxy.state import Connections
from airlock.proxy.store.memory import MemoryStore


def placeholder() -> str:
    return f"airlock-gh-{uuid.uuid4()}"


def real_token(length: int = 40) -> str:
    token = f"ghs_REAL{uuid.uuid4().hex}"
    while len(token) < length:
        token += uuid.uuid4().hex
    return token[:length] if length >= 40 else token


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def api_rule(ph: str, token: str, host: str = "api.github.com") -> dict[str, Any]:
    return {
        "host": host,
        "placeholder": ph,
        "schemes": ["token", "bearer"],
        "replace": {"scheme": "bearer", "token": token},
    }


def git_rule(ph: str, token: str, host: str = "github.com") -> dict[str, Any]:
    return {
        "host": host,
        "placeholder": ph,
        "schemes": ["basic"],
        "replace": {"scheme": "basic", "token": token},
    }


async def run(
    argv: list[str], env: Mapping[str, str], timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """Run a real client program without blocking the test's event loop."""
    return await asyncio.to_thread(
        subprocess.run, argv, env=dict(env), capture_output=True, text=True, timeout=timeout
    )


async def curl(env: Mapping[str, str], *args: str) -> tuple[int, str, str]:
    """curl through the proxy: (HTTP status or 0, body, stderr)."""
    result = await run(
        ["curl", "-sS", "--max-time", "20", "-o", "-", "-w", "\n%{http_code}", *args], env
    )
    body, _, code = result.stdout.rpartition("\n")
    return int(code or 0), body, result.stderr


async def curl_connect_status(env: Mapping[str, str], url: str) -> int:
    """The proxy's answer to CONNECT (403, 407, ...) as curl reports it."""
    result = await run(
        ["curl", "-sS", "--max-time", "20", "-o", "/dev/null", "-w", "%{http_connect}", url], env
    )
    return int(result.stdout.strip() or 0)


def proxy_ssl_context(ca_path: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_path)


def unit_context(
    tmp_path: Path,
    *,
    connections: Connections | None = None,
    audit_interval_s: float = 0.05,
    **config: Any,
) -> ProxyContext:
    """A :class:`ProxyContext` for in-process tests: memory store, audit log
    (``audit.log``) and state under ``tmp_path``, nothing listening; ``config``
    overrides :class:`ProxyConfig` fields."""
    cfg = ProxyConfig(
        listen_host=config.pop("listen_host", "127.0.0.1"),
        listen_port=config.pop("listen_port", 8080),
        control=config.pop("control", ControlEndpoint(kind="unix", path=tmp_path / "c.sock")),
        state_dir=tmp_path,
        **config,
    )
    audit = AuditLog(
        tmp_path / "audit.log",
        interval_s=audit_interval_s,
        sample_per_minute=cfg.refusal_audit_per_minute,
    )
    return ProxyContext.create(cfg, MemoryStore(), audit, connections=connections)
