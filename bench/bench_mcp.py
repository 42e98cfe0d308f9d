"""What ``airlock mcp`` adds: an MCP ``tools/call`` of file_read (4 KiB) over stdio vs the
same call straight to airlockd.

One airlockd serves both paths at the same time: a ``DaemonClient`` calls it
directly, and the official ``mcp`` client calls it through ``airlock mcp``
(a subprocess on stdio). The machine is shared and its load drifts, so the two
are measured in interleaved rounds (the order alternates every round); the
table reports the median of the per-round p50/p99, and the added p50 is the
median of the per-round differences. Target: under 1 ms added at p50.

Two floors put the figure in context: one more process hop (a 4 KiB line
echoed by a minimal Python process over pipes), and the same SDK serving a
do-nothing tool that answers 4 KiB over the same stdio transport. The second is
what any MCP server built on the official SDK costs on this machine; "added
beyond the SDK floor" is what airlock mcp's own code (argument checks, the
daemon call, rendering) adds on top of it.

Second table: what the bearer check (``--http-token-file``) and trace propagation
(``traceparent`` sent by the client, parsed, logged on an access line and kept for
commands by airlockd) add to a ``tools/call`` over streamable HTTP. Two stacks serve
the same workspace in one run: "with" is the shipped code (token required and sent,
traces on); "without" runs ``airlock mcp --http`` with no token and a client whose
``traceparent`` is a constant, against an airlockd whose trace middleware is replaced
by a pass-through. Interleaved rounds as above. Target: under 0.2 ms added at p50.

``python -m bench mcp [--rounds N] [--calls N]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from airlock.client.daemon import DaemonClient
from bench.report import percentile, table
from tests.fakes.daemon_harness import running_daemon

TARGET_ADDED_P50_MS = 1.0
TARGET_AUTH_TRACE_P50_MS = 0.2
TOKEN = "bench-" + "5" * 40
# airlockd with the trace middleware replaced by a pass-through (the "without" stack).
UNTRACED_DAEMON = """
import sys
from aiohttp import web
import airlock.daemon.server as server

@web.middleware
async def passthrough(request, handler):
    return await handler(request)

server.trace_middleware = passthrough
from airlock.daemon.cli import main
sys.exit(main(sys.argv[1:]))
"""
# airlock mcp whose DaemonClient sends a constant traceparent (no per-call generation).
UNTRACED_MCP = """
import sys
import airlock.client.tracing as tracing
CONSTANT = tracing.fresh().header
tracing.outgoing = lambda default=None: CONSTANT
from airlock.client.cli import main
sys.exit(main(sys.argv[1:]))
"""
NOOP_SERVER = """
import anyio
from mcp import types
from mcp.server.lowlevel import Server
from airlock.client.mcp.stdio import stdio_streams

server = Server("noop")

@server.list_tools()
async def tools():
    return [types.Tool(name="noop", inputSchema={"type": "object"})]

@server.call_tool()
async def call(name, arguments):
    return [types.TextContent(type="text", text="x" * 4096)]

async def main():
    async with stdio_streams() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
"""
ECHO = "import sys\nfor line in sys.stdin.buffer:\n    sys.stdout.buffer.write(line)\n    sys.stdout.buffer.flush()\n"


async def _timed(call: Callable[[], Awaitable[object]], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


Call = Callable[[], Awaitable[object]]
PerRound = dict[str, list[tuple[float, float]]]


async def _interleaved(
    paths: dict[str, Call], rounds: int, calls: int
) -> tuple[PerRound, list[dict[str, float]]]:
    """Every path ``calls`` times a round, the order reversed every other round so drift
    hits all alike: (per path, each round's (p50, p99)), (each round's p50 per path)."""
    per_round: PerRound = {name: [] for name in paths}
    p50s_by_round: list[dict[str, float]] = []
    for r in range(rounds):
        order = list(paths.items())
        if r % 2:
            order.reverse()
        p50s = {}
        for name, call in order:
            samples = await _timed(call, calls)
            per_round[name].append((percentile(samples, 50), percentile(samples, 99)))
            p50s[name] = percentile(samples, 50)
        p50s_by_round.append(p50s)
    return per_round, p50s_by_round


def _report(
    title: str,
    column: str,
    per_round: PerRound,
    labels: dict[str, str],
    what: str,
    added: list[float],
    target_ms: float,
) -> None:
    """A table with one row per path (the medians over rounds of its p50 and p99),
    then the median of ``added`` against its target."""
    rows = [
        [
            label,
            statistics.median(p for p, _ in per_round[name]),
            statistics.median(p for _, p in per_round[name]),
        ]
        for name, label in labels.items()
    ]
    print(title)
    print(table([column, "p50 ms", "p99 ms"], rows))
    extra = statistics.median(added)
    verdict = "ok" if extra < target_ms else "over target"
    print(f"added p50 by {what}: {extra:.3f} ms (target < {target_ms} ms: {verdict})")


async def run(rounds: int, calls: int) -> None:
    ws = Path(tempfile.mkdtemp(prefix="al-bm-"))
    (ws / "page.txt").write_text(("x" * 63 + "\n") * 64)  # 4 KiB
    args = {"path": "page.txt"}
    async with running_daemon(ws) as daemon, DaemonClient(socket=str(daemon.socket)) as direct:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "airlock.client.cli", "mcp", "--daemon", f"unix:{daemon.socket}"],
            env=dict(os.environ),
        )
        noop_params = StdioServerParameters(
            command=sys.executable, args=["-c", NOOP_SERVER], env=dict(os.environ)
        )
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as mcp,
            stdio_client(noop_params) as (noop_read, noop_write),
            ClientSession(noop_read, noop_write) as noop,
        ):
            await mcp.initialize()
            await mcp.list_tools()
            await noop.initialize()
            await noop.list_tools()

            async def sdk_floor() -> object:
                return await noop.call_tool("noop", {})

            async def via_mcp() -> object:
                result = await mcp.call_tool("file_read", args)
                assert not result.isError, result.content
                return result

            async def straight() -> object:
                return await direct.call("file_read", args)

            echo = await asyncio.create_subprocess_exec(
                sys.executable, "-c", ECHO,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            assert echo.stdin is not None and echo.stdout is not None
            line = b'{"x": "' + b"x" * 4096 + b'"}\n'

            async def hop() -> object:
                assert echo.stdin is not None and echo.stdout is not None
                echo.stdin.write(line)
                await echo.stdin.drain()
                return await echo.stdout.readline()

            await _timed(via_mcp, 50)
            await _timed(straight, 50)
            await _timed(hop, 50)
            await _timed(sdk_floor, 50)
            per_round, by_round = await _interleaved(
                {"daemon": straight, "mcp": via_mcp, "hop": hop, "sdk": sdk_floor}, rounds, calls
            )
            added = [p["mcp"] - p["daemon"] for p in by_round]
            beyond = [p["mcp"] - p["daemon"] - p["sdk"] for p in by_round]
            echo.stdin.close()
            await echo.wait()
    _report(
        f"file_read 4 KiB, {rounds} rounds x {calls} sequential calls per path (ms)",
        "path",
        per_round,
        {
            "daemon": "DaemonClient → airlockd",
            "mcp": "mcp client → airlock mcp (stdio) → airlockd",
            "hop": "floor: one stdio process hop (4 KiB echo)",
            "sdk": "floor: mcp SDK stdio server, do-nothing tool (4 KiB)",
        },
        "airlock mcp",
        added,
        TARGET_ADDED_P50_MS,
    )
    print(f"added beyond the SDK floor: {statistics.median(beyond):.3f} ms")


@contextlib.asynccontextmanager
async def _mcp_http(argv: list[str], port: int, token: str | None) -> AsyncIterator[ClientSession]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from tests.fakes.net import wait_port

    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        await wait_port(port, proc)
        async with (
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http) as (r, w, _),
            ClientSession(r, w) as session,
        ):
            await session.initialize()
            await session.list_tools()
            yield session
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


@contextlib.asynccontextmanager
async def _untraced_daemon(ws: Path) -> AsyncIterator[Path]:
    from tests.fakes.daemon_harness import wait_for_socket

    base = Path(tempfile.mkdtemp(prefix="al-bm-"))
    sock = base / "d.sock"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", UNTRACED_DAEMON, "--workspace", str(ws), "--socket", str(sock),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        await wait_for_socket(sock, proc)
        yield sock
    finally:
        proc.send_signal(signal.SIGTERM)
        await proc.wait()


async def run_http(rounds: int, calls: int) -> None:
    """The bearer check and trace propagation over streamable HTTP, with vs without."""
    from tests.fakes.net import free_port

    ws = Path(tempfile.mkdtemp(prefix="al-bm-"))
    (ws / "page.txt").write_text(("x" * 63 + "\n") * 64)  # 4 KiB
    token_file = ws.parent / f"{ws.name}-token"
    token_file.write_text(TOKEN + "\n")
    args = {"path": "page.txt"}
    port_with, port_without = free_port(), free_port()
    async with running_daemon(ws) as traced, _untraced_daemon(ws) as untraced_sock:
        with_argv = [
            sys.executable, "-m", "airlock.client.cli", "mcp",
            "--daemon", f"unix:{traced.socket}", "--http", f"127.0.0.1:{port_with}",
            "--http-token-file", str(token_file),
        ]  # fmt: skip
        without_argv = [
            sys.executable, "-c", UNTRACED_MCP, "mcp",
            "--daemon", f"unix:{untraced_sock}", "--http", f"127.0.0.1:{port_without}",
        ]  # fmt: skip
        async with (
            _mcp_http(with_argv, port_with, TOKEN) as with_session,
            _mcp_http(without_argv, port_without, None) as without_session,
        ):

            def caller(session: ClientSession) -> Callable[[], Awaitable[object]]:
                async def call() -> object:
                    result = await session.call_tool("file_read", args)
                    assert not result.isError, result.content
                    return result

                return call

            direct_with = DaemonClient(socket=str(traced.socket))
            direct_without = DaemonClient(
                socket=str(untraced_sock), traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01"
            )

            async def hop_with() -> object:
                return await direct_with.call("file_read", args)

            async def hop_without() -> object:
                return await direct_without.call("file_read", args)

            paths = {
                "with": caller(with_session),
                "without": caller(without_session),
                "hop_with": hop_with,
                "hop_without": hop_without,
            }
            for call in paths.values():
                await _timed(call, 50)
            per_round, by_round = await _interleaved(paths, rounds, calls)
            added = [p["with"] - p["without"] for p in by_round]
            hop_added = [p["hop_with"] - p["hop_without"] for p in by_round]
            await direct_with.aclose()
            await direct_without.aclose()
    _report(
        f"\nfile_read 4 KiB over streamable HTTP, {rounds} rounds x {calls} calls (ms)",
        "stack",
        per_round,
        {
            "with": "mcp client → airlock mcp (HTTP): bearer token + traceparent (shipped)",
            "without": "mcp client → airlock mcp (HTTP): no token, no trace middleware",
            "hop_with": "DaemonClient → airlockd: fresh traceparent + access line (shipped)",
            "hop_without": "DaemonClient → airlockd: no trace middleware",
        },
        "the bearer check + trace propagation",
        added,
        TARGET_AUTH_TRACE_P50_MS,
    )
    print(
        f"of which the daemon hop (traceparent, middleware, access line): "
        f"{statistics.median(hop_added):.3f} ms"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench_mcp")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    opts = parser.parse_args(argv if argv is not None else [])
    asyncio.run(run(opts.rounds, opts.calls))
    asyncio.run(run_http(opts.rounds, opts.calls))


if __name__ == "__main__":
    main(sys.argv[1:])
