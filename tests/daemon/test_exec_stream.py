"""``POST /v1/exec/stream`` over a real airlockd on a Unix socket: events as they happen."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from airlock.client.daemon import DaemonClient
from airlock.daemon.errors import AirlockError
from airlock.daemon.procs.tree import alive
from airlock.daemon.protocol import (
    ExecEvent,
    ExecExitEvent,
    ExecOutputEvent,
    ExecStartedEvent,
)
from tests.fakes.daemon_harness import RunningDaemon, daemon_in
from tests.fakes.wait import wait_until

# One daemon for the module (starting one costs seconds on a loaded machine).
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningDaemon]:
    async with daemon_in(tmp_path_factory.mktemp("stream"), tokens=True) as d:
        yield d


@pytest.fixture
def workspace_dir(daemon: RunningDaemon) -> Path:
    return daemon.workspace


@pytest_asyncio.fixture(loop_scope="module")
async def client(daemon: RunningDaemon) -> AsyncIterator[DaemonClient]:
    async with daemon.client(token="w-token") as c:
        yield c


async def collect(client: DaemonClient, **kw: Any) -> list[ExecEvent]:
    return [event async for event in client.exec_stream(**kw)]


def output(events: list[ExecEvent], stream: str) -> str:
    return "".join(e.data for e in events if isinstance(e, ExecOutputEvent) and e.type == stream)


async def test_first_line_arrives_while_the_command_still_waits(
    client: DaemonClient, workspace_dir: Path
) -> None:
    """The command prints 'one', then waits for a file only this test creates after seeing 'one'."""
    gate = workspace_dir / "go"
    script = f"echo one; while [ ! -e {gate} ]; do sleep 0.02; done; echo two"
    seen: list[str] = []
    async for event in client.exec_stream(argv=["sh", "-c", script], timeout_s=60):
        if isinstance(event, ExecOutputEvent):
            seen.append(event.data)
            if event.data == "one\n":
                gate.touch()
        if isinstance(event, ExecExitEvent):
            assert event.exit_code == 0
    assert seen == ["one\n", "two\n"]


async def test_echo_sleep_echo_first_line_before_the_second_is_printed(
    client: DaemonClient,
) -> None:
    pid = 0
    arrivals: list[tuple[str, bool]] = []
    async for event in client.exec_stream(argv=["sh", "-c", "echo one; sleep 2; echo two"]):
        if isinstance(event, ExecStartedEvent):
            pid = event.pid
        elif isinstance(event, ExecOutputEvent):
            # When 'one' arrives the shell is still sleeping: 'two' has not been printed.
            arrivals.append((event.data, alive(pid)))
    assert arrivals[0] == ("one\n", True)
    assert [text for text, _ in arrivals] == ["one\n", "two\n"]


async def test_ordering_and_offsets(client: DaemonClient) -> None:
    script = (
        "import sys\n"
        "for i in range(200):\n"
        "    s = sys.stdout if i % 2 == 0 else sys.stderr\n"
        "    s.write(f'{i:04d} é\\n'); s.flush()\n"
    )
    events = await collect(client, argv=[sys.executable, "-c", script])
    assert isinstance(events[0], ExecStartedEvent) and events[0].pid > 0
    assert isinstance(events[-1], ExecExitEvent) and events[-1].exit_code == 0
    for stream in ("stdout", "stderr"):
        at = 0
        for e in events:
            if isinstance(e, ExecOutputEvent) and e.type == stream:
                assert e.offset == at, "offsets must be contiguous byte positions"
                at += len(e.data.encode())
    want_out = "".join(f"{i:04d} é\n" for i in range(0, 200, 2))
    want_err = "".join(f"{i:04d} é\n" for i in range(1, 200, 2))
    assert output(events, "stdout") == want_out and output(events, "stderr") == want_err


async def test_one_mib_of_multibyte_output_in_bounded_events(client: DaemonClient) -> None:
    # 'é' is two bytes: 64 KiB reads cut characters in half all the time.
    script = "import sys; sys.stdout.write('aé' * 349526); sys.stdout.flush()"
    events = await collect(client, argv=[sys.executable, "-c", script])
    chunks = [e for e in events if isinstance(e, ExecOutputEvent)]
    assert len(chunks) > 10
    assert all(len(e.data.encode()) <= 64 * 1024 for e in chunks)
    text = output(events, "stdout")
    assert text == "aé" * 349526 and "\ufffd" not in text
    assert isinstance(events[-1], ExecExitEvent) and events[-1].exit_code == 0


async def test_wire_lines_are_json_dumps_with_exact_offsets(daemon: RunningDaemon) -> None:
    # 3- and 4-byte characters against 256 KiB reads and 64 KiB events, invalid bytes, quotes,
    # backslashes and controls; read raw so the bytes on the wire are what is checked.
    out = ("x" + "€" * 90_000 + "😀" * 70_000 + '"\\\t\x01\x7f' * 5000).encode() + b"\xff\xe2\x82"
    (daemon.workspace / "wire.bin").write_bytes(out)
    body = {"argv": ["cat", "wire.bin"]}
    conn = aiohttp.UnixConnector(path=str(daemon.socket))
    headers = {"Authorization": "Bearer w-token"}
    async with (
        aiohttp.ClientSession(connector=conn, headers=headers) as http,
        http.post("http://d/v1/exec/stream", json=body) as resp,
    ):
        raw = await resp.read()
    lines = raw.split(b"\n")[:-1]
    events = [json.loads(line) for line in lines]
    for line, event in zip(lines, events, strict=True):
        assert line == json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()
    chunks = [e for e in events if e["type"] == "stdout"]
    offsets = [e["offset"] for e in chunks] + [len(out)]
    assert offsets[0] == 0 and len(chunks) > 10
    for event, start, end in zip(chunks, offsets, offsets[1:], strict=False):
        assert 0 < end - start <= 64 * 1024 and len(event["data"].encode()) <= 64 * 1024
        assert event["data"] == out[start:end].decode("utf-8", errors="replace")
    assert "".join(e["data"] for e in chunks) == out.decode("utf-8", errors="replace")
    assert events[-1]["type"] == "exit" and events[-1]["exit_code"] == 0


async def test_timeout_ends_with_a_timed_out_exit(client: DaemonClient) -> None:
    events = await collect(client, argv=["sh", "-c", "echo start; exec sleep 60"], timeout_s=1)
    assert output(events, "stdout") == "start\n"
    last = events[-1]
    assert isinstance(last, ExecExitEvent)
    assert last.timed_out is True and last.exit_code is None and last.signal == 9


async def test_disconnect_kills_the_group(client: DaemonClient) -> None:
    script = "sleep 300 & echo $!; sleep 300"
    pids: list[int] = []
    stream = client.exec_stream(argv=["sh", "-c", script])
    assert isinstance(stream, AsyncGenerator)  # aclosing() needs its aclose()
    async with contextlib.aclosing(stream) as events:
        async for event in events:
            if isinstance(event, ExecStartedEvent):
                pids.append(event.pid)
            elif isinstance(event, ExecOutputEvent):
                pids.append(int(event.data))
                break
    await client.aclose()
    assert len(pids) == 2
    await wait_until(
        lambda: not any(alive(p) for p in pids), message="the group outlived its client"
    )


async def test_errors_before_start_are_envelopes(client: DaemonClient) -> None:
    with pytest.raises(AirlockError) as info:
        await collect(client, argv=["definitely-not-a-program-xyz"])
    assert info.value.code == "not_found"
    with pytest.raises(AirlockError) as info:
        await collect(client, argv=["true"], cwd="../..")
    assert info.value.code == "path_escape"
    with pytest.raises(AirlockError) as info:
        await collect(client, argv=["true"], env={"A=B": "x"})
    assert info.value.code == "invalid_request"


async def test_bad_bodies_are_envelopes(daemon: RunningDaemon) -> None:
    conn = aiohttp.UnixConnector(path=str(daemon.socket))
    headers = {"Authorization": "Bearer w-token"}
    async with aiohttp.ClientSession(connector=conn, headers=headers) as http:
        for body in (b"not json", b"[1,2]", json.dumps({"argv": []}).encode()):
            async with http.post("http://d/v1/exec/stream", data=body) as resp:
                assert resp.status == 400
                assert (await resp.json())["error"]["code"] == "invalid_request"


async def test_read_scope_is_refused(daemon: RunningDaemon) -> None:
    async with daemon.client(token="r-token") as reader:
        with pytest.raises(AirlockError) as info:
            await collect(reader, argv=["echo", "hi"])
    assert info.value.code == "forbidden"
    async with daemon.client() as anonymous:
        with pytest.raises(AirlockError) as info:
            await collect(anonymous, argv=["echo", "hi"])
    assert info.value.code == "unauthorized"


async def test_caps_like_exec_without_a_spill(client: DaemonClient, daemon: RunningDaemon) -> None:
    script = "import sys; [print(f'line {i:05d}') for i in range(20000)]"
    before = set(daemon.artifacts_dir.glob("exec-*"))
    events = await collect(client, argv=[sys.executable, "-c", script], max_output_bytes=1000)
    last = events[-1]
    assert isinstance(last, ExecExitEvent) and last.stdout_truncated
    # The stream carried everything: no second copy is written to disk while it is read.
    assert output(events, "stdout").count("\n") == 20000
    assert last.spill_path is None
    assert set(daemon.artifacts_dir.glob("exec-*")) == before


async def test_openapi_describes_the_stream(client: DaemonClient) -> None:
    spec = await client.openapi()
    route = spec["paths"]["/v1/exec/stream"]["post"]
    assert "application/x-ndjson" in route["responses"]["200"]["content"]
    assert {"/v1/tools/process_start", "/v1/tools/process_read"} <= set(spec["paths"])


async def test_a_slow_client_still_gets_every_byte(client: DaemonClient) -> None:
    """The command exits long before the client has read its output; nothing is cut off."""
    script = "import sys; sys.stdout.write('z' * (1 << 20)); sys.stdout.flush()"
    got = 0
    paused_after_exit = False
    pid = 0
    async for event in client.exec_stream(argv=[sys.executable, "-c", script]):
        if isinstance(event, ExecStartedEvent):
            pid = event.pid

            # Read nothing until the command has exited with its output still queued.
            def exited(started: int = pid) -> bool:
                return not alive(started)

            await wait_until(
                exited,
                timeout=10,
                message="the command should have exited while output was still queued",
            )
            paused_after_exit = True
            # The point of the test: a client slower than the daemon's drain grace.
            await asyncio.sleep(3)
        elif isinstance(event, ExecOutputEvent):
            got += len(event.data)
    assert paused_after_exit, "the command should have exited while output was still queued"
    assert got == 1 << 20
