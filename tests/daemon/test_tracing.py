"""A W3C traceparent from a DaemonClient call to airlockd's JSON log and the command's environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airlock.client import tracing
from airlock.client.daemon import DaemonClient
from tests.fakes.daemon_harness import running_daemon
from tests.fakes.wait import wait_until

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PRINT_TP = ["sh", "-c", 'printf %s "$TRACEPARENT"']


def _access_lines(log: str) -> list[dict[str, Any]]:
    out = []
    for line in log.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("logger") == "airlockd.access":
                out.append(record)
    return out


async def test_traceparent_reaches_the_json_log_and_every_command(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, extra_args=["--log-format", "json"]) as daemon:
        async with DaemonClient(socket=str(daemon.socket), traceparent=TP) as client:
            ran = await client.call("exec", {"argv": PRINT_TP})
            assert ran["stdout"] == TP
            chunks = [
                e.model_dump()
                async for e in client.exec_stream(argv=PRINT_TP)
                if e.type == "stdout"
            ]
            assert "".join(c["data"] for c in chunks) == TP
            started = await client.call("process_start", {"argv": PRINT_TP})
            part = await client.call("process_read", {"id": started["id"], "wait_ms": 5000})
            text = part["stdout"]
            while not part.get("exited") and part.get("exit_code") is None and len(text) < len(TP):
                part = await client.call(
                    "process_read",
                    {"id": started["id"], "offset": part["next_offset"], "wait_ms": 5000},
                )
                text += part["stdout"]
            assert text == TP
            # The caller's own env still wins (an orchestrator may pass a child context).
            other = "00-11111111111111111111111111111111-2222222222222222-00"
            ran = await client.call("exec", {"argv": PRINT_TP, "env": {"TRACEPARENT": other}})
            assert ran["stdout"] == other

        def logged() -> list[dict[str, Any]]:
            lines = [r for r in _access_lines(daemon.log()) if r.get("trace_id") == TRACE_ID]
            return lines if len(lines) >= 5 else []

        lines = await wait_until(logged, message="the access lines never reached the log")
        assert {r["route"] for r in lines} >= {"/v1/tools/{name}", "/v1/exec/stream"}
        assert {r.get("tool") for r in lines} >= {"exec", "process_start", "process_read"}
        assert all(r["traceparent"] == TP and r["status"] == 200 for r in lines)


async def test_each_call_without_a_context_starts_its_own_trace(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, extra_args=["--log-format", "json"]) as daemon:
        async with daemon.client() as client:
            first = (await client.call("exec", {"argv": PRINT_TP}))["stdout"]
            second = (await client.call("exec", {"argv": PRINT_TP}))["stdout"]
        parsed = [tracing.parse(first), tracing.parse(second)]
        assert all(p is not None for p in parsed), (first, second)
        assert parsed[0] != parsed[1]
        # A caller-given context (tracing.use) wins over the fresh one.
        async with daemon.client() as client:
            with tracing.use(TP):
                assert (await client.call("exec", {"argv": PRINT_TP}))["stdout"] == TP


async def test_an_invalid_traceparent_starts_a_new_trace(tmp_path: Path) -> None:
    import aiohttp

    bad = "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
    async with running_daemon(tmp_path, extra_args=["--log-format", "json"]) as daemon:
        conn = aiohttp.UnixConnector(path=str(daemon.socket))
        async with (
            aiohttp.ClientSession(connector=conn) as http,
            http.post(
                "http://airlockd/v1/tools/exec",
                json={"argv": PRINT_TP},
                headers={"traceparent": bad},
            ) as resp,
        ):
            body = await resp.json()
        got = tracing.parse(body["stdout"])
        assert got is not None and got.trace_id != "0" * 32
        lines = await wait_until(
            lambda: [r for r in _access_lines(daemon.log()) if r.get("tool") == "exec"]
        )
        assert lines[0]["traceparent"] is None and lines[0]["trace_id"] == got.trace_id


async def test_otel_exports_a_span_per_tool_call(tmp_path: Path) -> None:
    from tests.fakes.otlp import otlp_collector

    async with otlp_collector() as collector:
        env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.traces_endpoint}
        async with (
            running_daemon(tmp_path, extra_args=["--otel"], env=env) as daemon,
            DaemonClient(socket=str(daemon.socket), traceparent=TP) as client,
        ):
            ran = await client.call("exec", {"argv": PRINT_TP})
            await client.tools()
            spans = await wait_until(
                lambda: collector.named("tool exec") and collector.named("GET /v1/tools"),
                message="no span reached the collector",
            )
        span = collector.named("tool exec")[0]
        assert span.service == "airlockd" and span.kind == 2  # SPAN_KIND_SERVER
        assert span.trace_id == TRACE_ID and span.parent_span_id == TP.split("-")[2]
        assert span.attributes["airlock.tool"] == "exec"
        assert span.attributes["http.response.status_code"] == 200
        assert spans
        # The command is a child of the daemon's span: same trace, the span's id as parent.
        child = tracing.parse(ran["stdout"])
        assert child is not None and child.trace_id == TRACE_ID
        assert child.parent_id == span.span_id
