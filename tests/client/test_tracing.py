"""W3C traceparent parsing and what the clients send (caller's value, OpenTelemetry, fresh)."""

from __future__ import annotations

import logging
import os

import pytest

from airlock.client import tracing
from airlock.client.cli_common import JsonFormatter
from airlock.client.daemon import DaemonClient
from airlock.client.proxy import ProxyClient

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (VALID, True),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", True),
        # A future version may append fields; version 00 may not.
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", True),
        (VALID + "-extra", False),
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", False),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", False),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", False),
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", False),
        ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", False),
        ("", False),
        (None, False),
        ("garbage", False),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nX-Evil: 1", False),
    ],
)
def test_parse(value: str | None, ok: bool) -> None:
    parsed = tracing.parse(value)
    assert (parsed is not None) == ok
    if parsed is not None and value == VALID:
        assert parsed.header == VALID and parsed.sampled


def test_fresh_traces_are_valid_and_distinct() -> None:
    seen = {tracing.outgoing() for _ in range(1000)}
    assert len(seen) == 1000
    assert all(tracing.parse(h) is not None for h in seen)
    child = tracing.fresh().child()
    assert tracing.parse(child.header) == child


def test_a_forked_child_draws_other_ids() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, tracing.outgoing().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    theirs = os.read(read, 200).decode()
    os.close(read)
    assert tracing.parse(theirs) is not None and theirs != tracing.outgoing()


def test_what_clients_send_comes_from_the_caller_then_otel_then_fresh() -> None:
    from opentelemetry.sdk.trace import TracerProvider

    given = "00-11111111111111111111111111111111-2222222222222222-01"
    own = "00-33333333333333333333333333333333-4444444444444444-00"
    assert tracing.outgoing(own) == own
    with tracing.use(given):
        assert tracing.outgoing(own) == given
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("orchestrator turn") as span:
        ctx = span.get_span_context()
        sent = tracing.parse(tracing.outgoing())
        assert sent is not None
        assert sent.trace_id == f"{ctx.trace_id:032x}"
        assert sent.parent_id == f"{ctx.span_id:016x}"
        assert tracing.outgoing(own) == own  # the client's own value still wins
    with pytest.raises(ValueError, match="traceparent"), tracing.use("not-a-traceparent"):
        pass


def test_clients_refuse_an_invalid_traceparent() -> None:
    with pytest.raises(ValueError, match="traceparent"):
        DaemonClient(socket="/nonexistent", traceparent="00-zz")
    with pytest.raises(ValueError, match="traceparent"):
        ProxyClient("unix:/nonexistent", traceparent="nope")


def test_the_json_log_carries_a_records_fields() -> None:
    record = logging.LogRecord("airlockd.access", logging.INFO, __file__, 1, "GET x", (), None)
    record.fields = {"trace_id": "abc", "status": 200}
    line = JsonFormatter().format(record)
    assert '"trace_id": "abc"' in line and '"status": 200' in line
    assert "\n" not in line
