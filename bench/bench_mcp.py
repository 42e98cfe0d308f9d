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

``python -m bench mcp [--rounds N] [--calls N]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from airlock.client.daemon import DaemonClient
from bench.report import percentile, table
from tests.fakes.daemon_harness import running_daemon

TARGET_ADDED_P50_MS = 1.0
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
            per_round: dict[str, list[tuple[float, float]]] = {
                "daemon": [], "mcp": [], "hop": [], "sdk": []
            }  # fmt: skip
            added: list[float] = []
            beyond: list[float] = []
            for r in range(rounds):
                order = [("daemon", straight), ("mcp", via_mcp), ("hop", hop), ("sdk", sdk_floor)]
                if r % 2:
                    order.reverse()
                p50s = {}
                for name, call in order:
                    samples = await _timed(call, calls)
                    per_round[name].append((percentile(samples, 50), percentile(samples, 99)))
                    p50s[name] = percentile(samples, 50)
                added.append(p50s["mcp"] - p50s["daemon"])
                beyond.append(p50s["mcp"] - p50s["daemon"] - p50s["sdk"])
            echo.stdin.close()
            await echo.wait()
    rows = []
    for name, label in (
        ("daemon", "DaemonClient → airlockd"),
        ("mcp", "mcp client → airlock mcp (stdio) → airlockd"),
        ("hop", "floor: one stdio process hop (4 KiB echo)"),
        ("sdk", "floor: mcp SDK stdio server, do-nothing tool (4 KiB)"),
    ):
        p50 = statistics.median(p for p, _ in per_round[name])
        p99 = statistics.median(p for _, p in per_round[name])
        rows.append([label, p50, p99])
    print(f"file_read 4 KiB, {rounds} rounds x {calls} sequential calls per path (ms)")
    print(table(["path", "p50 ms", "p99 ms"], rows))
    extra = statistics.median(added)
    verdict = "ok" if extra < TARGET_ADDED_P50_MS else "over target"
    print(
        f"added p50 by airlock mcp: {extra:.3f} ms (target < {TARGET_ADDED_P50_MS} ms: {verdict})"
    )
    print(f"added beyond the SDK floor: {statistics.median(beyond):.3f} ms")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench_mcp")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    opts = parser.parse_args(argv if argv is not None else [])
    asyncio.run(run(opts.rounds, opts.calls))


if __name__ == "__main__":
    main(sys.argv[1:])
