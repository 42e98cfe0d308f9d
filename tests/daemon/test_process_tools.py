"""Background processes over a real airlockd on a Unix socket: servers, stdin, limits, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import aiohttp
import pytest
import pytest_asyncio

from airlock.client.daemon import DaemonClient
from airlock.daemon.errors import AirlockError
from airlock.daemon.procs.tree import alive
from airlock.daemon.protocol import MAX_LIVE_PROCESSES, ProcessReadOutput
from tests.fakes.daemon_harness import RunningDaemon, daemon_in, running_daemon
from tests.fakes.net import free_port
from tests.fakes.wait import wait_until, yield_to_loop

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningDaemon]:
    async with daemon_in(tmp_path_factory.mktemp("procs"), tokens=True) as d:
        yield d


@pytest_asyncio.fixture(loop_scope="module")
async def client(daemon: RunningDaemon) -> AsyncIterator[DaemonClient]:
    async with daemon.client(token="w-token") as c:
        yield c


class Log:
    """Follows one process's output the way an agent would: offset by offset, long-polling."""

    def __init__(self, client: DaemonClient, pid_id: str) -> None:
        self.client = client
        self.id = pid_id
        self.offset = 0
        self.stdout = ""
        self.stderr = ""
        self.last: ProcessReadOutput | None = None

    async def poll(self, wait_ms: int = 2000) -> ProcessReadOutput:
        part = await self.client.process_read(id=self.id, offset=self.offset, wait_ms=wait_ms)
        self.offset = part.next_offset
        self.stdout += part.stdout
        self.stderr += part.stderr
        self.last = part
        return part

    async def until(self, predicate: object, rounds: int = 20) -> None:
        for _ in range(rounds):
            if predicate(self):  # type: ignore[operator]
                return
            await self.poll()
        raise AssertionError(f"never happened; stdout={self.stdout!r} stderr={self.stderr!r}")


async def wait_gone(pids: list[int], deadline_s: float = 20.0) -> bool:
    with contextlib.suppress(AssertionError):
        await wait_until(lambda: not any(alive(p) for p in pids), timeout=deadline_s)
    return not any(alive(p) for p in pids)


async def test_dev_server_answers_while_the_agent_reads_its_log(client: DaemonClient) -> None:
    port = free_port()
    started = await client.process_start(
        argv=[sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        env={"PYTHONUNBUFFERED": "1"},
        name="dev-server",
    )
    log = Log(client, started.id)
    await log.until(lambda lg: "Serving HTTP" in lg.stdout)
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/") as resp:
        assert resp.status == 200
    await log.until(lambda lg: '"GET / HTTP/1.1" 200' in lg.stderr)
    assert log.last is not None and log.last.running is True
    listing = await client.process_list()
    assert any(p.id == started.id and p.name == "dev-server" for p in listing.processes)
    killed = await client.process_kill(id=started.id)
    assert killed.running is False
    final = await log.poll(wait_ms=0)
    assert final.running is False and final.signal == signal.SIGTERM


async def test_cat_echoes_what_process_write_sends_then_eof(client: DaemonClient) -> None:
    started = await client.process_start(argv=["cat"])
    log = Log(client, started.id)
    wrote = await client.process_write(id=started.id, data="hello from the agent\n")
    assert wrote.written == len(b"hello from the agent\n") and wrote.stdin_open
    await log.until(lambda lg: lg.stdout == "hello from the agent\n")
    assert log.last is not None and log.last.running
    closed = await client.process_write(id=started.id, data="bye\n", eof=True)
    assert closed.stdin_open is False
    await log.until(lambda lg: lg.last is not None and not lg.last.running)
    assert log.stdout == "hello from the agent\nbye\n"
    assert log.last is not None and log.last.exit_code == 0
    with pytest.raises(AirlockError) as info:
        await client.process_write(id=started.id, data="more")
    assert info.value.code == "invalid_request" and "closed" in info.value.message


async def test_long_poll_wakes_on_output(client: DaemonClient) -> None:
    started = await client.process_start(argv=["cat"])
    reader = asyncio.create_task(client.process_read(id=started.id, offset=0, wait_ms=30000))
    await yield_to_loop()  # let the read start first (it must not matter)
    await client.process_write(id=started.id, data="ping\n")
    # Generous deadline: far below wait_ms, so only a wake-up on output can meet it.
    part = await asyncio.wait_for(reader, 20)
    assert part.stdout == "ping\n" and part.next_offset == 5 and part.running
    await client.process_kill(id=started.id, signal="KILL")


async def test_process_kill_signals(client: DaemonClient) -> None:
    kinds: tuple[tuple[Literal["INT", "KILL"], int], ...] = (
        ("INT", signal.SIGINT),
        ("KILL", signal.SIGKILL),
    )
    for name, number in kinds:
        started = await client.process_start(argv=["sleep", "300"])
        killed = await client.process_kill(id=started.id, signal=name)
        assert killed.running is False and killed.exit_code is None and killed.signal == name
        part = await client.process_read(id=started.id)
        assert part.signal == number and part.running is False
        assert not alive(started.pid)
    with pytest.raises(AirlockError) as info:
        await client.process_kill(id="p999")
    assert info.value.code == "not_found" and "process_list" in info.value.message


async def test_kill_takes_the_whole_tree(client: DaemonClient) -> None:
    script = (
        "import os, signal, sys\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        print(os.getpid(), flush=True); signal.pause()\n"
        "    os._exit(0)\n"
        "signal.pause()\n"
    )
    started = await client.process_start(argv=[sys.executable, "-c", script])
    log = Log(client, started.id)
    await log.until(lambda lg: lg.stdout.strip().isdigit())
    grandchild = int(log.stdout)
    assert alive(grandchild)
    await client.process_kill(id=started.id, signal="KILL")
    assert await wait_gone([started.pid, grandchild])


async def test_the_33rd_process_is_refused(client: DaemonClient) -> None:
    running = sum(1 for p in (await client.process_list()).processes if p.running)
    ids = []
    try:
        for _ in range(MAX_LIVE_PROCESSES - running):
            ids.append((await client.process_start(argv=["sleep", "300"])).id)
        with pytest.raises(AirlockError) as info:
            await client.process_start(argv=["sleep", "300"])
        assert info.value.code == "conflict"
        assert "limit is 32" in info.value.message and "process_kill" in info.value.message
    finally:
        for pid_id in ids:
            await client.process_kill(id=pid_id, signal="KILL")
    # A slot is free again once one is killed.
    again = await client.process_start(argv=["true"])
    assert again.pid > 0


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_twenty_mib_drops_old_output_and_bounds_memory(
    client: DaemonClient, daemon: RunningDaemon
) -> None:
    before = rss_kib(daemon.process.pid)
    script = "import sys\nfor i in range(20):\n    sys.stdout.buffer.write(bytes([65 + i]) * (1 << 20))\n"
    started = await client.process_start(argv=[sys.executable, "-c", script])
    part = await client.process_read(id=started.id, wait_ms=1000)
    for _ in range(200):
        if not part.running:
            break
        part = await client.process_read(id=started.id, offset=part.next_offset, wait_ms=1000)
    listing = {p.id: p for p in (await client.process_list()).processes}
    assert listing[started.id].output_bytes == 20 << 20
    # Reading from 0 now: only the newest 8 MiB are kept.
    first = await client.process_read(id=started.id, offset=0, max_bytes=1024)
    assert first.dropped == (20 << 20) - (8 << 20)
    assert first.stdout == chr(65 + 12) * 1024  # the oldest byte kept starts the 13th MiB
    growth = rss_kib(daemon.process.pid) - before
    assert growth < 64 * 1024, f"daemon RSS grew {growth} KiB"


async def test_read_scope(daemon: RunningDaemon, client: DaemonClient) -> None:
    started = await client.process_start(argv=["sh", "-c", "echo visible"])
    async with daemon.client(token="r-token") as reader:
        with pytest.raises(AirlockError) as info:
            await reader.process_start(argv=["echo", "no"])
        assert info.value.code == "forbidden"
        for call in (
            reader.process_write(id=started.id, data="x"),
            reader.process_kill(id=started.id),
        ):
            with pytest.raises(AirlockError) as info:
                await call
            assert info.value.code == "forbidden"
        part = await reader.process_read(id=started.id, wait_ms=2000)
        assert "visible" in part.stdout or part.running
        assert any(p.id == started.id for p in (await reader.process_list()).processes)


async def test_bad_inputs_are_envelopes(client: DaemonClient) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"argv": []}, "invalid_request"),
        ({"argv": ["definitely-not-a-program-xyz"]}, "not_found"),
        ({"argv": ["true"], "cwd": "/"}, "path_escape"),
        ({"argv": ["true"], "env": {"": "x"}}, "invalid_request"),
        ({"argv": ["a\u0000b"]}, "invalid_request"),
    ]
    for args, code in cases:
        with pytest.raises(AirlockError) as info:
            await client.call("process_start", args)
        assert info.value.code == code, args
    with pytest.raises(AirlockError) as info:
        await client.call("process_read", {"id": "p1", "wait_ms": 30001})
    assert info.value.code == "invalid_request"


async def test_daemon_sigterm_leaves_no_process_behind(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    escaper = (
        # One write(2) per pid line: two processes' print() calls could interleave.
        "import os, signal\n"
        "say = lambda: os.write(1, f'{os.getpid()}\\n'.encode())\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        say(); signal.pause()\n"
        "    os._exit(0)\n"
        "say(); signal.pause()\n"
    )
    pids: list[int] = []
    async with running_daemon(workspace) as daemon:
        async with daemon.client() as c:
            for argv, printed in (
                (["sh", "-c", "sleep 300 & echo $!; exec sleep 300"], 1),
                ([sys.executable, "-c", escaper], 2),
            ):
                started = await c.process_start(argv=argv)
                pids.append(started.pid)
                log = Log(c, started.id)
                want = printed
                await log.until(lambda lg, want=want: len(lg.stdout.split()) >= want)
                pids.extend(int(x) for x in log.stdout.split())
        assert all(alive(p) for p in pids)
        daemon.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(daemon.process.wait(), 30) == 0
    assert await wait_gone(pids), [p for p in pids if alive(p)]
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or not alive(pid)
