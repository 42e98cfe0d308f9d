"""The complete sandbox agent: transfer MB/s, watch latency, keystroke echo, exec stream.

All in one run on one machine, so every ratio compares numbers taken under the
same load:

- transfer: a SIZE-byte file up and down through airlockd (``curl
  --unix-socket`` and ``DaemonClient.upload/download``), against ``cat``
  through a local pipe and against ``curl --unix-socket`` to a bare aiohttp
  file handler in its own process (goal: airlockd >= 0.5x the bare handler);
- watch: milliseconds from a write to its event reaching the client (goal p99
  under 100 ms; the 50 ms coalescing window is part of it);
- keystroke echo: ``process_write`` of one key to a ``cat`` in a PTY until its
  echo comes back through a waiting ``process_read`` (goal p50 under 10 ms);
- ``/v1/exec/stream`` MB/s against a Python reader of a local pipe (goal >= 0.3x).

``python -m bench.bench_agent [--size-mb N] [--samples S]`` (``BENCH_SCALE=small``:
50 MB, 50 samples).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web

from bench.bench_stream import local_python_reader, producer, raw_stream
from bench.report import figure, percentile, table
from tests.fakes.daemon_harness import RunningDaemon, running_daemon, wait_for_socket

# ---------------------------------------------------------------- the bare handler


def serve_bare(socket: str, directory: str) -> None:
    """The baseline: aiohttp with nothing but a streamed PUT and a FileResponse GET."""

    async def put(request: web.Request) -> web.Response:
        with open(Path(directory) / "up.bin", "wb") as out:
            async for chunk in request.content.iter_chunked(1 << 20):
                out.write(chunk)
        return web.Response(text="ok")

    async def get(request: web.Request) -> web.FileResponse:
        return web.FileResponse(Path(directory) / "down.bin")

    app = web.Application()
    app.router.add_put("/up", put)
    app.router.add_get("/down", get)
    app.router.add_get("/v1/health", lambda r: web.Response(text="ok"))  # type: ignore[arg-type,return-value]
    web.run_app(app, path=socket, print=None)


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


async def transfer(
    daemon: RunningDaemon, base: Path, size_mb: int, rounds: int
) -> list[list[object]]:
    src = base / "src.bin"
    with src.open("wb") as out:
        block = os.urandom(1 << 20)
        for _ in range(size_mb):
            out.write(block)
    bare_dir = base / "bare"
    bare_dir.mkdir()
    shutil.copy(src, bare_dir / "down.bin")
    bare_sock = base / "bare.sock"
    bare = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.bench_agent", "--serve-bare", str(bare_sock), str(bare_dir)
    )
    try:
        await wait_for_socket(bare_sock, bare)
        results: dict[str, list[float]] = {}

        def add(name: str, seconds: float) -> None:
            results.setdefault(name, []).append(seconds)

        ds = str(daemon.socket)
        url = "http://d/v1/files?path=bench.bin"
        for _ in range(rounds):
            add("cat up", timed(["sh", "-c", f"cat {src} | cat > {base / 'cat.bin'}"]))
            add(
                "cat down",
                timed(["sh", "-c", f"cat {base / 'cat.bin'} | cat > {base / 'cat2.bin'}"]),
            )
            add(
                "bare up",
                timed(
                    ["curl", "-sf", "--unix-socket", str(bare_sock), "-T", str(src), "http://b/up"]
                ),
            )
            add(
                "bare down",
                timed(
                    [
                        "curl",
                        "-sf",
                        "--unix-socket",
                        str(bare_sock),
                        "-o",
                        str(base / "b.bin"),
                        "http://b/down",
                    ]
                ),
            )
            add("airlockd up", timed(["curl", "-sf", "--unix-socket", ds, "-T", str(src), url]))
            add(
                "airlockd down",
                timed(["curl", "-sf", "--unix-socket", ds, "-o", str(base / "a.bin"), url]),
            )
            # Unchanged since: the ETag (sha256) comes from the daemon's hash cache.
            add(
                "airlockd again",
                timed(["curl", "-sf", "--unix-socket", ds, "-o", str(base / "a.bin"), url]),
            )
            async with daemon.client() as client:
                started = time.perf_counter()
                await client.upload(src, "bench2.bin")
                add("client up", time.perf_counter() - started)
                started = time.perf_counter()
                await client.download("bench2.bin", base / "c.bin")
                add("client down", time.perf_counter() - started)
    finally:
        bare.terminate()
        await bare.wait()
    rate = {k: size_mb / percentile(v, 50) for k, v in results.items()}
    rows: list[list[object]] = []
    for way in ("up", "down"):
        for who in ("cat", "bare", "airlockd", "client"):
            r = rate[f"{who} {way}"]
            rows.append([f"{who} {way}", f"{r:.0f}", f"{r / rate[f'bare {way}']:.2f}"])
        if way == "down":
            r = rate["airlockd again"]
            rows.append(["airlockd down, ETag cached", f"{r:.0f}", f"{r / rate['bare down']:.2f}"])
        figure(
            f"transfer {way} MB/s",
            rate[f"airlockd {way}"],
            unit="MB/s",
            baseline=rate[f"bare {way}"],
            baseline_name="bare aiohttp handler",
            target=">= 0.5x",
        )
    return rows


async def watch_latency(daemon: RunningDaemon, samples: int) -> list[float]:
    out: list[float] = []
    async with daemon.client() as client, client.watch(["."], include=["lat-*"]) as stream:
        events = stream.__aiter__()
        for i in range(samples):
            path = daemon.workspace / f"lat-{i}"
            started = time.perf_counter()
            path.write_bytes(b"x")
            event = await events.__anext__()
            out.append((time.perf_counter() - started) * 1000)
            assert event.path == f"lat-{i}", event
            await asyncio.sleep(0.06)  # the next write starts a fresh coalescing window
    return out


async def echo_rtt(daemon: RunningDaemon, samples: int) -> list[float]:
    out: list[float] = []
    async with daemon.client() as client:
        started_proc = await client.process_start(argv=["cat"], pty=True)
        pid = started_proc.id
        offset = 0
        try:
            for _ in range(samples):
                reader = asyncio.ensure_future(
                    client.process_read(id=pid, offset=offset, wait_ms=5000)
                )
                await asyncio.sleep(0.002)  # the read is waiting in the daemon
                started = time.perf_counter()
                await client.process_write(id=pid, data="k")
                part = await reader
                while "k" not in part.stdout:
                    part = await client.process_read(id=pid, offset=part.next_offset, wait_ms=5000)
                out.append((time.perf_counter() - started) * 1000)
                offset = part.next_offset
        finally:
            await client.process_kill(id=pid, signal="KILL")
    return out


async def stream_ratio(daemon: RunningDaemon, size_mb: int, rounds: int) -> tuple[float, float]:
    command = producer("yes", size_mb * 1_000_000)
    await raw_stream(daemon, command)
    reader, stream = [], []
    for _ in range(rounds):
        reader.append(local_python_reader(command))
        stream.append((await raw_stream(daemon, command))[0])
    return size_mb / percentile(reader, 50), size_mb / percentile(stream, 50)


async def run(size_mb: int, samples: int, rounds: int) -> str:
    base = Path(tempfile.mkdtemp(prefix="al-bench-agent-"))
    workspace = base / "ws"
    workspace.mkdir()
    try:
        async with running_daemon(workspace) as daemon:
            rows = await transfer(daemon, base, size_mb, rounds)
            lat = await watch_latency(daemon, samples)
            rtt = await echo_rtt(daemon, samples)
            reader_rate, stream_rate = await stream_ratio(daemon, size_mb, rounds)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    figure("watch first event p99", percentile(lat, 99), unit="ms", target="< 100 ms")
    figure("pty echo p50", percentile(rtt, 50), unit="ms", target="< 10 ms")
    figure(
        "exec stream MB/s",
        stream_rate,
        unit="MB/s",
        baseline=reader_rate,
        baseline_name="Python reader of a local pipe",
        target=">= 0.3x",
    )
    return "\n".join(
        [
            f"transfer of {size_mb} MB, median of {rounds} rounds (x bare: against the bare "
            "aiohttp handler; goal airlockd >= 0.5x)",
            table(["path", "MB/s", "x bare"], rows),
            "",
            f"watch: write to event at the client ({len(lat)} samples; goal p99 < 100 ms)",
            table(
                ["p50 ms", "p99 ms", "max ms"],
                [[percentile(lat, 50), percentile(lat, 99), max(lat)]],
            ),
            "",
            f"PTY keystroke echo round trip ({len(rtt)} samples; goal p50 < 10 ms)",
            table(
                ["p50 ms", "p99 ms", "max ms"],
                [[percentile(rtt, 50), percentile(rtt, 99), max(rtt)]],
            ),
            "",
            f"/v1/exec/stream against a Python reader of a local pipe ({size_mb} MB; goal >= 0.3x)",
            table(
                ["path", "MB/s", "x reader"],
                [
                    ["Python reader of a local pipe", f"{reader_rate:.0f}", "1.00"],
                    [
                        "/v1/exec/stream (raw read)",
                        f"{stream_rate:.0f}",
                        f"{stream_rate / reader_rate:.2f}",
                    ],
                ],
            ),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["--serve-bare"]:
        serve_bare(args_in[1], args_in[2])
        return
    small = os.environ.get("BENCH_SCALE") == "small"
    parser = argparse.ArgumentParser(prog="bench_agent", description=__doc__)
    parser.add_argument("--size-mb", type=int, default=50 if small else 200)
    parser.add_argument("--samples", type=int, default=50 if small else 200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(args_in)
    print(asyncio.run(run(args.size_mb, args.samples, args.rounds)))


if __name__ == "__main__":
    main()
