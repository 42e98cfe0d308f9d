"""How airlockd's latency grows with concurrent connections: 10 / 100 / 1,000.

A real airlockd subprocess on its Unix socket; N clients, each on its own
keep-alive connection, read a 4 KiB file in a loop (``file_read``) while one
more client polls ``/v1/health``. Per N: p50 and p99 of ``file_read``,
p99 of health, and errors. The scaling table runs the daemon with
``--max-connections`` above the largest N, so it measures queueing; a last row
runs the largest N against the default cap (256), which answers the excess
connections 503 at once instead of queueing them. The cost per unit is the p50
divided by N: with one event loop, requests queue, so p50 grows linearly with
N by design (see docs/performance.md).
``BENCH_SCALE=small``: 10 / 100.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import aiohttp

from bench import report, sampling
from tests.fakes.daemon_harness import running_daemon

REQUESTS = 2000


async def one_level(socket: Path, clients: int) -> tuple[list[float], list[float], int]:
    per_client = max(2, REQUESTS // clients)
    reads: list[float] = []
    errors = 0
    done = asyncio.Event()

    async def client() -> None:
        nonlocal errors
        connector = aiohttp.UnixConnector(path=str(socket), limit=1)
        async with aiohttp.ClientSession(connector=connector) as http:
            for _ in range(per_client):
                ms = await sampling.timed_ok(
                    http.post("http://airlockd/v1/tools/file_read", json={"path": "page.txt"})
                )
                if ms is None:
                    errors += 1
                else:
                    reads.append(ms)

    poller = asyncio.create_task(sampling.health_samples(socket, done.is_set))
    await asyncio.gather(*(client() for _ in range(clients)))
    done.set()
    health = await poller
    return reads, health, errors


async def run() -> None:
    levels = report.steps([10, 100, 1000], [10, 100])
    base = Path(tempfile.mkdtemp(prefix="al-bsd-"))
    ws = base / "ws"
    ws.mkdir()
    (ws / "page.txt").write_text(("x" * 63 + "\n") * 64)
    rows: list[list[object]] = []
    p50s: list[float] = []
    cap = str(max(levels) * 2 + 16)

    def row(label: str, reads: list[float], health: list[float], errors: int) -> list[object]:
        return [
            label,
            len(reads),
            report.percentile(reads, 50),
            report.percentile(reads, 99),
            report.percentile(health, 99),
            errors,
        ]

    try:
        async with running_daemon(ws, extra_args=("--max-connections", cap)) as daemon:
            await one_level(daemon.socket, 10)  # warm-up
            for level in levels:
                reads, health, errors = await one_level(daemon.socket, level)
                p50s.append(report.percentile(reads, 50))
                rows.append(row(str(level), reads, health, errors))
        async with running_daemon(ws) as daemon:
            await one_level(daemon.socket, 10)
            reads, health, errors = await one_level(daemon.socket, max(levels))
            rows.append(row(f"{max(levels)}, default cap", reads, health, errors))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("file_read of 4 KiB under N concurrent keep-alive connections (ms)")
    print(
        report.table(
            ["connections", "reads", "p50", "p99", "health p99", "errors"],
            rows,
            title="daemon connections",
        )
    )
    print(report.scaling_table("file_read p50 by connections", "connections", levels, p50s))


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
