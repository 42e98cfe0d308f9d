"""Each request's trace: W3C ``traceparent`` in, an access line out, ``TRACEPARENT`` to commands.

The outermost middleware of every listener. It takes the caller's
``traceparent`` (an invalid or missing one starts a new trace), and with
``--otel`` records a SERVER span as its child (``tool NAME`` for a tool call).
While the request runs, :func:`trace_env` gives the value commands started
for it inherit (``exec``, ``/v1/exec/stream``, ``process_start``): the span's
own context with ``--otel``, else the caller's header unchanged. When the
request ends, one access line is logged (logger ``airlockd.access``, INFO)
with the method, route, status, duration and trace; the JSON log format
carries them as fields. No header but ``traceparent`` is ever logged.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from airlock.client import tracing

access_log = logging.getLogger("airlockd.access")
SPANS = tracing.Spans()

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "airlockd_traceparent", default=None
)


def trace_env() -> dict[str, str]:
    """``{"TRACEPARENT": ...}`` for a command the current request starts (empty outside one)."""
    value = _CURRENT.get()
    return {tracing.ENV_VAR: value} if value is not None else {}


def _route(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


@web.middleware
async def trace_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    incoming = tracing.parse(request.headers.get(tracing.HEADER))
    route = _route(request)
    tool = request.match_info.get("name") if route == "/v1/tools/{name}" else None
    name = f"tool {tool}" if tool is not None else f"{request.method} {route}"
    attributes = {"http.request.method": request.method, "http.route": route}
    if tool is not None:
        attributes["airlock.tool"] = tool
    started = time.perf_counter()
    status = 500
    with SPANS.server(name, incoming, attributes) as (propagate, span):
        token = _CURRENT.set(propagate.header)
        try:
            response = await handler(request)
            status = response.status
            return response
        finally:
            _CURRENT.reset(token)
            SPANS.finish(span, status)
            ms = round((time.perf_counter() - started) * 1000, 3)
            access_log.info(
                "%s %s %d %.1fms trace=%s",
                request.method,
                tool or route,
                status,
                ms,
                propagate.trace_id,
                extra={
                    "fields": {
                        "method": request.method,
                        "route": route,
                        "tool": tool,
                        "status": status,
                        "duration_ms": ms,
                        "trace_id": propagate.trace_id,
                        "traceparent": incoming.header if incoming is not None else None,
                        "span_id": propagate.parent_id,
                    }
                },
            )
