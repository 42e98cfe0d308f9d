"""file_read round trip over airlockd's socket against a bare aiohttp floor.

Both servers run as separate processes on Unix sockets at the same time and
answer with the same bytes (checked before measuring); each is driven by the
same client code over its own keep-alive aiohttp session. The machine is shared
and its load drifts, so the servers are measured in interleaved rounds (the
order alternates every round) and the table reports the median over rounds; the
ratio is the median of the per-round ratios, each taken from back-to-back
measurements. Target: p50 within 1.5x of the floor.

``--baseline-tree DIR`` adds an airlockd started from another source tree (for
example ``git archive`` of an older commit), measured in the same rounds, to
compare before and after a change on the same machine at the same time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bench.report import percentile, table
from tests.fakes.daemon_harness import running_daemon, wait_for_socket

ROUNDS = 9
SEQUENTIAL_PER_ROUND = 400
CONCURRENT_CLIENTS = 16
PER_CLIENT_PER_ROUND = 40
WARM_UP = 200

FLOOR_SERVER = textwrap.dedent(
    """
    import sys
    from aiohttp import web
    body = open(sys.argv[2], "rb").read()
    async def handler(request):
        await request.read()
        return web.Response(body=body, content_type="application/json")
    async def health(request):
        return web.Response(text="{}", content_type="application/json")
    app = web.Application()
    app.router.add_post("/v1/tools/file_read", handler)
    app.router.add_get("/v1/health", health)
    web.run_app(app, path=sys.argv[1], print=None, access_log=None)
    """
)

URL = "http://bench/v1/tools/file_read"
HEADERS = {"Content-Type": "application/json"}


@dataclass
class Target:
    """One server under test and what the rounds measured on it."""

    name: str
    http: aiohttp.ClientSession
    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    rps: list[float] = field(default_factory=list)


async def post(http: aiohttp.ClientSession, data: bytes) -> bytes:
    async with http.post(URL, data=data, headers=HEADERS) as resp:
        body = await resp.read()
        if resp.status != 200:
            raise RuntimeError(f"status {resp.status}: {body[:200]!r}")
        return body


async def sequential(target: Target, data: bytes, count: int) -> None:
    lat: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        await post(target.http, data)
        lat.append((time.perf_counter() - started) * 1000)
    target.p50.append(percentile(lat, 50))
    target.p99.append(percentile(lat, 99))


async def concurrent(target: Target, data: bytes) -> None:
    async def client() -> None:
        for _ in range(PER_CLIENT_PER_ROUND):
            await post(target.http, data)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(CONCURRENT_CLIENTS)))
    elapsed = time.perf_counter() - started
    target.rps.append(CONCURRENT_CLIENTS * PER_CLIENT_PER_ROUND / elapsed)


@asynccontextmanager
async def session(socket: Path) -> AsyncIterator[aiohttp.ClientSession]:
    conn = aiohttp.UnixConnector(path=str(socket), limit=CONCURRENT_CLIENTS)
    async with aiohttp.ClientSession(connector=conn) as http:
        yield http


@asynccontextmanager
async def floor_server(base: Path, body: bytes) -> AsyncIterator[Path]:
    body_file = base / "body.json"
    body_file.write_bytes(body)
    sock = base / "floor.sock"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", FLOOR_SERVER, str(sock), str(body_file)
    )
    try:
        await wait_for_socket(sock, proc)
        yield sock
    finally:
        proc.terminate()
        await proc.wait()


async def run(rounds: int, per_round: int, baseline_tree: Path | None) -> None:
    base = Path(tempfile.mkdtemp(prefix="al-b-"))
    try:
        await measure_all(base, rounds, per_round, baseline_tree)
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def measure_all(base: Path, rounds: int, per_round: int, baseline_tree: Path | None) -> None:
    ws = base / "ws"
    ws.mkdir()
    (ws / "file.txt").write_text(("0123456789abcdef" * 4 + "\n") * 63)  # ~4 KiB
    data = json.dumps({"path": "file.txt"}).encode()
    async with AsyncExitStack() as stack:
        daemon = await stack.enter_async_context(running_daemon(ws))
        ours = Target("airlockd file_read", await stack.enter_async_context(session(daemon.socket)))
        body = await post(ours.http, data)
        floor_sock = await stack.enter_async_context(floor_server(base, body))
        floor = Target("bare aiohttp (floor)", await stack.enter_async_context(session(floor_sock)))
        targets = [floor, ours]
        if baseline_tree is not None:
            tree = str(baseline_tree.resolve())
            # `python -m` puts the working directory first on sys.path: start it in the tree.
            other = await stack.enter_async_context(
                running_daemon(ws, env={"PYTHONPATH": tree}, command_prefix=("env", "-C", tree))
            )
            http = await stack.enter_async_context(session(other.socket))
            targets.append(Target(f"airlockd from {baseline_tree}", http))
        for target in targets:  # the same bytes from every server, then warm up
            if await post(target.http, data) != body:
                raise RuntimeError(f"{target.name} answered different bytes")
            for _ in range(WARM_UP):
                await post(target.http, data)
        ratios: list[float] = []
        for number in range(rounds):
            order = targets if number % 2 == 0 else targets[::-1]
            for target in order:
                await sequential(target, data, per_round)
            for target in order:
                await concurrent(target, data)
            ratios.append(ours.p50[-1] / floor.p50[-1])
    rows = [
        (t.name, statistics.median(t.p50), statistics.median(t.p99), statistics.median(t.rps))
        for t in targets
    ]
    print(
        f"file_read of a {len(body)}-byte response: {rounds} interleaved rounds of "
        f"{per_round} sequential requests and {CONCURRENT_CLIENTS}x{PER_CLIENT_PER_ROUND} "
        f"concurrent per server; medians over rounds (cpu count {os.cpu_count()})"
    )
    print(table(["server", "p50 ms", "p99 ms", "req/s"], rows))
    spread = ", ".join(f"{r:.2f}" for r in sorted(ratios))
    print(
        f"p50 ratio airlockd/floor: {statistics.median(ratios):.2f} (target < 1.5; "
        f"per round, sorted: {spread})"
    )


def _old_read(ctx: Any, raw: str) -> Any:
    """The pre-hardening file_read path, kept only here as the resolver baseline: resolve
    by name (realpath), then open the path string again (the race the new resolver closes)."""
    from airlock.daemon.text import decode
    from airlock.daemon.tools.read import page_text

    resolved = ctx.resolve(raw, intent="read")
    fd = os.open(resolved.real, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)
    finally:
        os.close(fd)
    decoded = decode(data, path=resolved.display)
    return page_text(
        resolved.display, decoded.text, decoded.line_ending, decoded.bom, 1, 2000, 100_000
    )


def resolver_micro(rounds: int, per_round: int) -> None:
    """file_read's in-process resolve+read, race-free resolver vs the old name-based one.

    Same process, same file, interleaved rounds (order alternating), medians of the
    per-round p50s: the socket round trip, which dominates and drifts with the
    machine's load, is left out so the resolver's own cost shows.
    """
    from airlock.daemon import openat2
    from airlock.daemon.context import DaemonConfig, ToolContext
    from airlock.daemon.tools.read import _resolve_and_read

    base = Path(tempfile.mkdtemp(prefix="al-br-"))
    try:
        ws = base / "ws" / "src" / "pkg"
        ws.mkdir(parents=True)
        (ws / "file.txt").write_text(("0123456789abcdef" * 4 + "\n") * 63)
        ctx = ToolContext.create(DaemonConfig(workspace=base / "ws", artifacts_dir=base / "a"))
        raw = "src/pkg/file.txt"
        variants: dict[str, Any] = {
            "old: realpath, then open by name": lambda: _old_read(ctx, raw),
            "new: openat2 beneath the root fd": lambda: _resolve_and_read(
                ctx, raw, [], 1, 2000, 100_000
            ),
        }
        assert (
            variants["old: realpath, then open by name"]()
            == variants["new: openat2 beneath the root fd"]()
        )
        p50s: dict[str, list[float]] = {name: [] for name in variants}
        p50s["new: component walk (AIRLOCK_RESOLVER=walk)"] = []
        for number in range(rounds):
            names = list(p50s) if number % 2 == 0 else list(p50s)[::-1]
            for name in names:
                walk = name.startswith("new: component")
                if walk:
                    os.environ["AIRLOCK_RESOLVER"] = "walk"
                fn = variants.get(name, variants["new: openat2 beneath the root fd"])
                lat: list[float] = []
                for _ in range(per_round):
                    t = time.perf_counter()
                    fn()
                    lat.append((time.perf_counter() - t) * 1e6)
                if walk:
                    os.environ.pop("AIRLOCK_RESOLVER", None)
                p50s[name].append(percentile(lat, 50))
        old = statistics.median(p50s["old: realpath, then open by name"])
        rows = [
            (name, statistics.median(v), statistics.median(v) / old) for name, v in p50s.items()
        ]
        print(
            f"resolve+read of a 4 KiB file, in process: {rounds} interleaved rounds of "
            f"{per_round} calls; medians of per-round p50 (openat2 available: "
            f"{openat2.available()})"
        )
        print(table(["file_read path", "p50 us", "ratio vs old"], rows))
        print("target: new/old <= 1.10")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_daemon")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--per-round", type=int, default=SEQUENTIAL_PER_ROUND)
    parser.add_argument(
        "--baseline-tree", type=Path, help="also measure an airlockd from this source tree"
    )
    parser.add_argument(
        "--resolver-only",
        action="store_true",
        help="only the in-process resolver comparison (race-free vs the old name-based one)",
    )
    args = parser.parse_args(list(argv))
    resolver_micro(max(args.rounds, 5), max(args.per_round, 2000))
    if not args.resolver_only:
        asyncio.run(run(args.rounds, args.per_round, args.baseline_tree))


if __name__ == "__main__":
    main(sys.argv[1:])
