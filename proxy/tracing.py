"""The control API's traces: W3C ``traceparent`` in, one access line out, optional spans.

The outermost middleware of the control API
(:func:`airlock.client.tracing.server_middleware`): each request's
``traceparent`` (a new trace when it has no valid one) is logged with the
request (logger ``airlock.proxy.control``, INFO; fields in the JSON log
format), and with ``--otel`` each request is a SERVER span. A lease PUT
stores the request's trace id with the lease, so the lease's swap audit lines
name the trace that installed it.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from airlock.client import tracing

access_log = logging.getLogger("airlock.proxy.control")
SPANS = tracing.Spans()


def _describe(request: web.Request) -> tuple[str, str, dict[str, Any]]:
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else "unmatched"
    return f"control {request.method} {route}", route, {}


trace_middleware = tracing.server_middleware(SPANS, access_log, _describe)


def request_trace_id(request: web.Request) -> str | None:
    """The trace id the middleware gave ``request`` (None outside it)."""
    trace = request.get("trace")
    return trace.trace_id if isinstance(trace, tracing.TraceParent) else None
