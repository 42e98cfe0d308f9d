"""W3C Trace Context (``traceparent``) for every airlock hop, and optional OpenTelemetry spans.

Standard library only (like :mod:`airlock.client.cli_common`), so airlockd and
airlock-proxy import it in every image whatever extra they installed.

- Clients (``DaemonClient``, ``ProxyClient``) send :func:`outgoing` on every
  request: the caller's own value when it gave one (:func:`use`), else the
  current OpenTelemetry span's context when ``opentelemetry-api`` is importable
  and a span is active, else a fresh valid one (a new trace per call).
- Servers (airlockd, the proxy's control API) take the incoming header with
  :func:`parse` (an invalid one is ignored and a new trace starts, as the W3C
  recommendation says), log it with each request, and with ``--otel``
  (:func:`setup_otel`) export one span per request as a child of it.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

HEADER = "traceparent"
ENV_VAR = "TRACEPARENT"
_PATTERN = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16

_random = random.Random()  # seeded from os.urandom; re-seeded in a forked child below
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_random.seed)

_GIVEN: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "airlock_traceparent", default=None
)


@dataclass(frozen=True)
class TraceParent:
    """One parsed ``traceparent``: ``00-<trace_id>-<parent_id>-<flags>``."""

    trace_id: str
    parent_id: str
    flags: str = "01"

    @property
    def header(self) -> str:
        return f"00-{self.trace_id}-{self.parent_id}-{self.flags}"

    @property
    def sampled(self) -> bool:
        return bool(int(self.flags, 16) & 1)

    def child(self) -> TraceParent:
        """The same trace with a new parent id (a hop that is a span of its own)."""
        return TraceParent(self.trace_id, _span_id(), self.flags)


def _span_id() -> str:
    return f"{_random.getrandbits(64) or 1:016x}"


def parse(value: str | None) -> TraceParent | None:
    """The W3C ``traceparent`` in ``value``, or None when it is absent or not valid.

    Version ``ff``, an all-zero trace or parent id and upper-case hex are invalid;
    a future version's extra fields are accepted (and dropped) as the spec says.
    """
    if not value:
        return None
    match = _PATTERN.fullmatch(value.strip())
    if match is None:
        return None
    version, trace_id, parent_id, flags, rest = match.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or parent_id == _ZERO_SPAN:
        return None
    if version == "00" and rest:
        return None
    return TraceParent(trace_id, parent_id, flags)


def fresh() -> TraceParent:
    """A new sampled trace (random trace and parent ids).

    Ids are identifiers, not secrets: a PRNG seeded from the OS (no system call per id)
    gives the uniqueness W3C asks for at a fraction of ``os.urandom``'s cost.
    """
    return TraceParent(f"{_random.getrandbits(128) or 1:032x}", _span_id(), "01")


@contextlib.contextmanager
def use(traceparent: str) -> Iterator[TraceParent]:
    """Within the block, clients send ``traceparent`` (it must be valid)."""
    parsed = parse(traceparent)
    if parsed is None:
        raise ValueError(
            f"{traceparent!r} is not a valid W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)"
        )
    token = _GIVEN.set(parsed.header)
    try:
        yield parsed
    finally:
        _GIVEN.reset(token)


def _from_otel() -> str | None:
    """The current OpenTelemetry span's context as a header, when there is one."""
    if _otel_trace is None:
        return None
    ctx = _otel_trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def outgoing(default: str | None = None) -> str:
    """What a client sends: the value given by :func:`use`, else ``default`` (the client's
    own), else the current OpenTelemetry context, else a fresh trace."""
    return _GIVEN.get() or default or _from_otel() or _fresh_header()


def _fresh_header() -> str:
    """``fresh().header`` without building the dataclass (every client call may need one)."""
    return f"00-{_random.getrandbits(128) or 1:032x}-{_random.getrandbits(64) or 1:016x}-01"


_otel_trace: Any
try:  # the API only (no SDK): reading the current context costs a few microseconds
    from opentelemetry import trace as _otel_trace
except ImportError:  # pragma: no cover - opentelemetry-api is optional
    _otel_trace = None


# ---------------------------------------------------------------- servers: spans (--otel)


class Spans:
    """Server spans for one service: a no-op until :func:`setup_otel` installs an exporter."""

    def __init__(self) -> None:
        self.tracer: Any = None
        self.provider: Any = None

    @property
    def enabled(self) -> bool:
        return self.tracer is not None

    @contextlib.contextmanager
    def server(
        self, name: str, incoming: TraceParent | None, attributes: dict[str, Any]
    ) -> Iterator[tuple[TraceParent, Any]]:
        """A SERVER span, child of ``incoming`` (a root without one); yields what to
        propagate further (the span's own context) and the span.

        Without ``--otel`` it yields ``incoming`` (or a fresh trace) and None: nothing
        is recorded and the caller's own ``traceparent`` travels on unchanged.
        """
        if self.tracer is None:
            yield (incoming or fresh()), None
            return
        from opentelemetry import trace
        from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

        parent = None
        if incoming is not None:
            parent = trace.set_span_in_context(
                NonRecordingSpan(
                    SpanContext(
                        trace_id=int(incoming.trace_id, 16),
                        span_id=int(incoming.parent_id, 16),
                        is_remote=True,
                        trace_flags=TraceFlags(int(incoming.flags, 16)),
                    )
                )
            )
        with self.tracer.start_as_current_span(
            name, context=parent, kind=SpanKind.SERVER, attributes=attributes
        ) as span:
            ctx = span.get_span_context()
            yield (
                TraceParent(
                    f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}", f"{ctx.trace_flags:02x}"
                ),
                span,
            )

    @staticmethod
    def finish(span: Any, status: int) -> None:
        """Record the HTTP status on ``span`` (an error status from 500 on)."""
        if span is None:
            return
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            from opentelemetry.trace import Status, StatusCode

            span.set_status(Status(StatusCode.ERROR))

    def shutdown(self) -> None:
        """Flush what is queued and stop the exporter (at the service's exit)."""
        if self.provider is not None:
            self.provider.shutdown()
            self.provider = None
            self.tracer = None


def setup_otel(spans: Spans, service: str, endpoint: str | None = None) -> None:
    """Export ``spans`` over OTLP/HTTP (the ``otel`` extra).

    The endpoint is ``endpoint``, else the standard ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
    / ``OTEL_EXPORTER_OTLP_ENDPOINT`` variables (the exporter reads them), else
    ``http://localhost:4318/v1/traces``. Raises ImportError with the install line when
    the extra is missing.
    """
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise ImportError("--otel needs the otel extra: pip install 'airlock[otel]'") from None
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=500))
    spans.provider = provider
    spans.tracer = provider.get_tracer("airlock")


# ---------------------------------------------------------------- servers: the request middleware

_SERVING: contextvars.ContextVar[TraceParent | None] = contextvars.ContextVar(
    "airlock_serving_trace", default=None
)


def serving() -> TraceParent | None:
    """The trace of the request being served (what the server propagates), if any."""
    return _SERVING.get()


Describe = Callable[[Any], tuple[str, str, dict[str, Any]]]


def server_middleware(spans: Spans, log: logging.Logger, describe: Describe) -> Any:
    """An aiohttp middleware: trace in, optional span, one access line out.

    ``describe(request)`` gives (span name, route, extra attributes). While the
    handler runs, :func:`serving` and ``request["trace"]`` hold the context to
    propagate. The access line (INFO) carries method, route, status, duration,
    ``trace_id``, ``span_id`` and the ``traceparent`` as received (None when the
    request had no valid one); no other header is logged.
    """

    async def middleware(request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        incoming = parse(request.headers.get(HEADER))
        name, route, extra = describe(request)
        attributes = {"http.request.method": request.method, "http.route": route, **extra}
        started = time.perf_counter()
        status = 500
        with spans.server(name, incoming, attributes) as (propagate, span):
            token = _SERVING.set(propagate)
            request["trace"] = propagate
            try:
                response = await handler(request)
                status = response.status
                return response
            finally:
                _SERVING.reset(token)
                spans.finish(span, status)
                if log.isEnabledFor(logging.INFO):  # else skip building the line
                    ms = round((time.perf_counter() - started) * 1000, 3)
                    log.info(
                        "%s %s %d %.1fms trace=%s",
                        request.method,
                        route,
                        status,
                        ms,
                        propagate.trace_id,
                        extra={
                            "fields": {
                                "method": request.method,
                                "route": route,
                                **{k.rpartition(".")[2]: v for k, v in extra.items()},
                                "status": status,
                                "duration_ms": ms,
                                "trace_id": propagate.trace_id,
                                "span_id": propagate.parent_id,
                                "traceparent": incoming.header if incoming is not None else None,
                            }
                        },
                    )

    middleware.__middleware_version__ = 1  # type: ignore[attr-defined]  # aiohttp new-style
    return middleware
