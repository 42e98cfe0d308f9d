"""The client's exec_stream() and process methods, and ``airlock exec/ps/logs/kill``, against a real airlockd."""

from __future__ import annotations

import json

import pytest

from airlock.client.daemon import DaemonClient, NotFound
from airlock.daemon.protocol import (
    ExecExitEvent,
    ExecOutputEvent,
    ExecStartedEvent,
    ProcessReadOutput,
)
from tests.fakes.daemon_fixtures import shared_daemon
from tests.fakes.daemon_harness import RunningDaemon
from tests.fakes.programs import run_airlock

pytestmark = pytest.mark.asyncio(loop_scope="module")


daemon, client = shared_daemon("client-procs")


async def test_exec_stream_yields_typed_events(client: DaemonClient) -> None:
    events = [e async for e in client.exec_stream(argv=["sh", "-c", "echo out; echo err >&2"])]
    assert isinstance(events[0], ExecStartedEvent)
    assert isinstance(events[-1], ExecExitEvent) and events[-1].exit_code == 0
    chunks = {(e.type, e.data) for e in events if isinstance(e, ExecOutputEvent)}
    assert chunks == {("stdout", "out\n"), ("stderr", "err\n")}


async def test_exec_stream_errors_raise_typed(client: DaemonClient) -> None:
    with pytest.raises(NotFound):
        async for _ in client.exec_stream(argv=["definitely-not-a-program-xyz"]):
            pass


async def test_process_methods_round_trip(client: DaemonClient) -> None:
    started = await client.process_start(argv=["cat"], stdin="first\n", name="echoer")
    await client.process_write(id=started.id, data="second\n", eof=True)
    part: ProcessReadOutput | None = None
    text = ""
    offset = 0
    for _ in range(50):
        part = await client.process_read(id=started.id, offset=offset, wait_ms=1000)
        text += part.stdout
        offset = part.next_offset
        if not part.running and part.next_offset == offset and text == "first\nsecond\n":
            break
    assert text == "first\nsecond\n" and part is not None and part.exit_code == 0
    listing = await client.process_list()
    assert [p.name for p in listing.processes if p.id == started.id] == ["echoer"]


async def test_cli_exec_prints_live_and_exits_with_the_code(daemon: RunningDaemon) -> None:
    sock = str(daemon.socket)
    code, out, err = await run_airlock(
        "exec", "--socket", sock, "--", "sh", "-c", "echo hello; echo oops >&2; exit 3"
    )
    assert (code, out, err) == (3, "hello\n", "oops\n")
    code, out, _ = await run_airlock("exec", "--socket", sock, "--", "echo", "a", "--", "b")
    assert (code, out) == (0, "a -- b\n")
    code, _, err = await run_airlock(
        "exec", "--socket", sock, "--timeout", "1", "--", "sleep", "30"
    )
    assert code == 124 and "timed out" in err
    code, _, err = await run_airlock("exec", "--socket", sock, "--", "definitely-not-a-program-xyz")
    assert code == 1 and "not_found" in err


async def test_cli_ps_logs_kill(client: DaemonClient, daemon: RunningDaemon) -> None:
    sock = str(daemon.socket)
    server = await client.process_start(
        argv=["sh", "-c", "echo serving; exec sleep 300"], name="web"
    )
    finite = await client.process_start(argv=["sh", "-c", "echo a; sleep 0.3; echo b"])
    code, out, _ = await run_airlock("ps", "--socket", sock)
    line = next(row for row in out.splitlines() if row.startswith(server.id + " "))
    assert code == 0 and "running" in line and "web" in line and "sleep 300" in line
    code, out, _ = await run_airlock("ps", "--socket", sock, "--json")
    assert server.id in {p["id"] for p in json.loads(out)["processes"]}
    # -f follows until the process exits.
    code, out, _ = await run_airlock("logs", "--socket", sock, finite.id, "-f")
    assert (code, out) == (0, "a\nb\n")
    code, out, _ = await run_airlock("kill", "--socket", sock, server.id)
    assert code == 0 and "stopped" in out
    code, out, _ = await run_airlock("logs", "--socket", sock, server.id)
    assert (code, out) == (0, "serving\n")
    code, _, err = await run_airlock("kill", "--socket", sock, "p999")
    assert code == 1 and "not_found" in err


async def test_cli_help_lists_the_commands() -> None:
    from airlock.client.cli import build_parser

    text = build_parser().format_help()
    for name in ("exec", "ps", "logs", "kill"):
        assert name in text
