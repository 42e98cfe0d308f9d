"""In-process context for the concern unit tests (mitmproxy.test style).

A real :class:`ProxyContext` (memory store, audit log in a temp dir, metrics)
whose connection killer records instead of reaching into a running mitmproxy.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from mitmproxy import http
from mitmproxy.test import tflow

from airlock.proxy.context import ProxyContext
from airlock.proxy.state import Connections
from tests.proxy.helpers import unit_context


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
    """:func:`unit_context` (listening on 18080 unless ``config`` says otherwise) with a
    connection killer that records what it was asked to kill."""
    connections = Connections()
    killed: list[tuple[str, str]] = []
    connections.set_killer(lambda cid, reason: killed.append((cid, reason)))
    config.setdefault("listen_port", 18080)
    ctx = unit_context(tmp_path, connections=connections, audit_interval_s=3600, **config)
    return Harness(ctx=ctx, killed=killed, audit_path=ctx.audit.path)


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
