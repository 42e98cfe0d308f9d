"""In-process context for the concern unit tests (mitmproxy.test style).

A real :class:`ProxyContext` (memory store, audit log in a temp dir, metrics)
whose connection killer records instead of reaching into a running mitmproxy.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from mitmproxy import http
from mitmproxy.test import tflow

from airlock.proxy.audit import AuditLog
from airlock.proxy.config import ControlEndpoint, ProxyConfig
from airlock.proxy.context import ProxyContext
from airlock.proxy.state import Connections
from airlock.proxy.store.memory import MemoryStore


@dataclasses.dataclass
class Harness:
    ctx: ProxyContext
    killed: list[tuple[str, str]]
    audit_path: Path

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        self.ctx.audit._drain()
        self.ctx.audit._file.flush()
        lines = [json.loads(x) for x in self.audit_path.read_text().splitlines() if x]
        return [e for e in lines if event is None or e["event"] == event]


def make_harness(tmp_path: Path, **config: Any) -> Harness:
    cfg = ProxyConfig(
        listen_host=config.pop("listen_host", "127.0.0.1"),
        listen_port=config.pop("listen_port", 18080),
        control=config.pop("control", ControlEndpoint(kind="unix", path=tmp_path / "c.sock")),
        state_dir=tmp_path,
        **config,
    )
    audit_path = tmp_path / "audit.log"
    audit = AuditLog(audit_path, interval_s=3600, sample_per_minute=cfg.refusal_audit_per_minute)
    store = MemoryStore()
    connections = Connections()
    killed: list[tuple[str, str]] = []
    connections.set_killer(lambda cid, reason: killed.append((cid, reason)))
    ctx = ProxyContext.create(cfg, store, audit, connections=connections)
    return Harness(ctx=ctx, killed=killed, audit_path=audit_path)


def basic(user: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


def connect_flow(
    host: str = "api.github.com", port: int = 443, auth: str | None = None
) -> http.HTTPFlow:
    flow = tflow.tflow()
    flow.request.method = "CONNECT"
    flow.request.host = host
    flow.request.port = port
    flow.request.path = ""
    if auth:
        flow.request.headers["proxy-authorization"] = auth
    return flow


def request_flow(client_flow: http.HTTPFlow | None = None, path: str = "/x") -> http.HTTPFlow:
    """A request on the same client connection as ``client_flow``."""
    flow = tflow.tflow(client_conn=client_flow.client_conn if client_flow else None)
    flow.request.scheme = "https"
    flow.request.host = "api.github.com"
    flow.request.port = 443
    flow.request.path = path
    return flow


def later(seconds: float) -> float:
    return time.time() + seconds
