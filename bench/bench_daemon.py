"""file_read round trip over airlockd's socket against a bare aiohttp floor.

Both servers run as separate processes on Unix sockets and answer with the
same bytes; the client is the same keep-alive aiohttp session. Target: p50
within 1.5x of the floor.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import aiohttp

from bench.report import percentile, table
from tests.fakes.daemon_harness import running_daemon, wait_for_socket

SEQUENTIAL = 2000
CONCURRENT_CLIENTS = 16
PER_CLIENT = 200

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


async def measure(socket: Path, payload: dict[str, object]) -> tuple[list[float], float]:
    data = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    conn = aiohttp.UnixConnector(path=str(socket), limit=CONCURRENT_CLIENTS)
    async with aiohttp.ClientSession(connector=conn) as http:
        url = "http://bench/v1/tools/file_read"
        for _ in range(100):  # warm up
            async with http.post(url, data=data, headers=headers) as r:
                await r.read()
        lat: list[float] = []
        for _ in range(SEQUENTIAL):
            t = time.perf_counter()
            async with http.post(url, data=data, headers=headers) as r:
                await r.read()
            lat.append((time.perf_counter() - t) * 1000)

        async def worker() -> None:
            for _ in range(PER_CLIENT):
                async with http.post(url, data=data, headers=headers) as r:
                    await r.read()

        t = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENT_CLIENTS)))
        rps = CONCURRENT_CLIENTS * PER_CLIENT / (time.perf_counter() - t)
    return lat, rps


async def run() -> None:
    base = Path(tempfile.mkdtemp(prefix="al-b-"))
    ws = base / "ws"
    ws.mkdir()
    (ws / "file.txt").write_text(("0123456789abcdef" * 4 + "\n") * 63)  # ~4 KiB
    payload = {"path": "file.txt"}
    async with running_daemon(ws) as daemon, daemon.client() as client:
        body = json.dumps(await client.call("file_read", payload)).encode()
        ours = await measure(daemon.socket, payload)
    body_file = base / "body.json"
    body_file.write_bytes(body)
    floor_sock = base / "floor.sock"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", FLOOR_SERVER, str(floor_sock), str(body_file)
    )
    try:
        await wait_for_socket(floor_sock, proc)
        floor = await measure(floor_sock, payload)
    finally:
        proc.terminate()
        await proc.wait()
    rows = []
    for name, (lat, rps) in (("bare aiohttp (floor)", floor), ("airlockd file_read", ours)):
        rows.append((name, percentile(lat, 50), percentile(lat, 99), rps))
    ratio = percentile(ours[0], 50) / percentile(floor[0], 50)
    print(
        f"file_read of a {len(body)}-byte response, {SEQUENTIAL} sequential requests, "
        f"{CONCURRENT_CLIENTS}x{PER_CLIENT} concurrent (cpu count {os.cpu_count()})"
    )
    print(table(["server", "p50 ms", "p99 ms", "req/s"], rows))
    print(f"p50 ratio airlockd/floor: {ratio:.2f} (target < 1.5)")


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
