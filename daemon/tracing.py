"""Each request's trace: W3C ``traceparent`` in, an access line out, ``TRACEPARENT`` to commands.

The outermost middleware of every listener
(:func:`airlock.client.tracing.server_middleware`): it takes the caller's
``traceparent`` (an invalid or missing one starts a new trace), and with
``--otel`` records a SERVER span as its child (``tool NAME`` for a tool call).
While the request runs, :func:`trace_env` gives the value commands started
for it inherit (``exec``, ``/v1/exec/stream``, ``process_start``): the span's
own context with ``--otel``, else the caller's header unchanged. When the
request ends, one access line is logged (logger ``airlockd.access``, INFO)
with the method, route, tool, status, duration and trace; the JSON log format
carries them as fields.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from airlock.client import tracing

access_log = logging.getLogger("airlockd.access")
SPANS = tracing.Spans()


def trace_env() -> dict[str, str]:
    """``{"TRACEPARENT": ...}`` for a command the current request starts (empty outside one)."""
    current = tracing.serving()
    return {tracing.ENV_VAR: current.header} if current is not None else {}


def _describe(request: web.Request) -> tuple[str, str, dict[str, Any]]:
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else "unmatched"
    if route == "/v1/tools/{name}":
        tool = request.match_info["name"]
        return f"tool {tool}", route, {"airlock.tool": tool}
    return f"{request.method} {route}", route, {}


trace_middleware = tracing.server_middleware(SPANS, access_log, _describe)
