"""airlock-proxy throughput/latency against plain mitmdump, in one run.

Scenarios (HTTPS GETs, keep-alive, 16 concurrent clients, local TLS upstream):

  (a) plain ``mitmdump`` with no addons (baseline)
  (b) airlock-proxy, memory store, 1 active lease (every request is swapped)
  (c) airlock-proxy, memory store, 10,000 active leases
  (d) airlock-proxy, Redis store, 1 active lease

  (b0) airlock-proxy as (b), without its connection-level guard (the "before")

plus the lease PUT+DELETE round trip over the Unix control socket, a
download table: one large body (``--download-mib``, 200 MiB by default) with
a Content-Length, chunked, and chunked + gzip, through (a), (b0) and (b). The
body is incompressible (a git pack is) and reflects the request's
Authorization value once per MiB, so airlock's stream scrubber decodes, scans
and rewrites for real and the guard checks every byte; "leaks" counts real
tokens the client received. Last, the proxy's RSS per idle tunnel and per
stalled tunnel (a sandbox that asked for the download and reads nothing).
Targets: (b) within 1.15x of (a); (c) within 1.05x of (b); round trip < 2 ms p50;
download MB/s of (b) >= 0.8x of (a), 0 leaks.

mitmdump runs with ``stream_large_bodies=4m`` like airlock-proxy: without it,
it would buffer the whole download in memory before relaying a byte.

The upstream and the proxy come from :mod:`bench.proxy_rig`; the upstream runs
in its own process so it does not share the load generator's GIL.
Run alone: ``python -m bench.bench_proxy [--seconds N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bench.proxy_rig import proxy_headers, start_proxy, start_upstream
from bench.report import bench_seconds, percentile, print_last_table, table
from bench.sampling import LoadTally, warm_then_measure
from tests.fakes.net import free_port as _free_port
from tests.fakes.net import wait_port as _wait_port
from tests.fakes.processes import stop_process

CONCURRENCY = 16
PLACEHOLDER = "airlock-gh-bench-placeholder-0001"
REAL = "ghs_bench_real_token_" + "x" * 20


# --- load generator ----------------------------------------------------------------


async def _load(
    url: str,
    proxy: str,
    proxy_headers: dict[str, str],
    ca: str,
    headers: dict[str, str],
    seconds: float,
) -> tuple[int, list[float], int]:
    ctx = ssl.create_default_context(cafile=ca)
    tally = LoadTally()

    async def worker(deadline: float, record: bool) -> None:
        connector = aiohttp.TCPConnector(limit=1, ssl=ctx)
        async with aiohttp.ClientSession(connector=connector) as session:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                try:
                    async with session.get(
                        url, proxy=proxy, proxy_headers=proxy_headers, headers=headers
                    ) as resp:
                        await resp.read()
                        ok = resp.status == 200
                except aiohttp.ClientError:
                    ok = False
                if record:
                    tally.add(ok, started)

    elapsed = await warm_then_measure(worker, CONCURRENCY, seconds)
    return int(len(tally.latencies) / elapsed), tally.latencies, tally.errors


async def _download(
    url: str, proxy: str, proxy_headers: dict[str, str], ca: str, size: int, query: str = ""
) -> tuple[float, int, int]:
    """One download through ``proxy``: (MiB/s of decoded body, bytes received,
    real tokens received)."""
    ctx = ssl.create_default_context(cafile=ca)
    received = leaks = 0
    tail = b""
    real = REAL.encode()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
        started = time.perf_counter()
        async with session.get(
            f"{url}?size={size}{query}",
            proxy=proxy,
            proxy_headers=proxy_headers,
            headers={"authorization": f"token {PLACEHOLDER}", "accept-encoding": "gzip"},
        ) as resp:
            async for chunk in resp.content.iter_chunked(1 << 16):
                received += len(chunk)
                window = tail + chunk
                leaks += window.count(real)
                tail = window[-(len(real) - 1) :]
        elapsed = time.perf_counter() - started
    return received / elapsed / (1 << 20), received, leaks


# --- scenarios ---------------------------------------------------------------------


@dataclass
class Target:
    name: str
    url: str
    proxy: str
    proxy_headers: dict[str, str]
    ca: str
    rps: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    pid: int | None = None  # airlock's process (leaks are counted for it)
    cpu_pid: int | None = None  # the proxy process whose CPU time a download costs


def _cpu_s(pid: int | None) -> float:
    """The process's user + system CPU seconds so far (0 when unknown)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ms(samples: list[float], q: float) -> float:
    return percentile(samples, q) * 1000


async def _start_mitmdump(stack: ExitStack, work: Path, up_port: int, ca_path: Path) -> Target:
    port = _free_port()
    confdir = work / "mitmdump-conf"
    mitmdump = Path(sys.executable).with_name("mitmdump")
    proc = subprocess.Popen(
        [
            str(mitmdump), "-q",
            "--listen-host", "127.0.0.1", "-p", str(port),
            "--set", f"confdir={confdir}",
            "--set", f"ssl_verify_upstream_trusted_ca={ca_path}",
            "--set", "connection_strategy=lazy",
            "--set", "upstream_cert=false",
            "--set", "stream_large_bodies=4m",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    stack.callback(stop_process, proc)
    await _wait_port(port, proc)
    for _ in range(200):
        if (confdir / "mitmproxy-ca-cert.pem").exists():
            break
        await asyncio.sleep(0.05)
    return Target(
        "(a) mitmdump, no addons",
        f"https://localhost:{up_port}/x",
        f"http://127.0.0.1:{port}",
        {},
        str(confdir / "mitmproxy-ca-cert.pem"),
        cpu_pid=proc.pid,
    )


RULE = {
    "host": "api.github.com",
    "placeholder": PLACEHOLDER,
    "schemes": ["token", "bearer"],
    "replace": {"scheme": "bearer", "token": REAL},
}


async def _start_airlock(
    stack: ExitStack,
    name: str,
    work: Path,
    up_port: int,
    ca_path: Path,
    *,
    store: str = "memory",
    extra_leases: int = 0,
    guard: bool = True,
    source: Path | None = None,
) -> tuple[Target, str, str]:
    from airlock.client.proxy import ProxyClient

    proxy = start_proxy(stack, work, up_port, ca_path, store=store, guard=guard, source=source)
    async with ProxyClient(proxy.control) as client:
        session = await client.create_session(allow=["api.github.com"], ttl_s=3600)
        await client.put_lease(session.session_id, "bench", [RULE], ttl_s=3600)
        await _fill(client, extra_leases)
    target = Target(
        name,
        "https://api.github.com/x",
        f"http://127.0.0.1:{proxy.port}",
        proxy_headers(session),
        str(proxy.ca_path),
        pid=proxy.process.pid if proxy.process is not None else None,
        cpu_pid=proxy.process.pid if proxy.process is not None else None,
    )
    return target, proxy.control, session.session_id


async def _round_trips(control: str, sid: str, count: int) -> list[float]:
    from airlock.client.proxy import ProxyClient

    trips: list[float] = []
    async with ProxyClient(control) as client:
        for i in range(count):
            started = time.perf_counter()
            rule = {**RULE, "placeholder": f"airlock-gh-rt-{i:08d}"}
            await client.put_lease(sid, f"rt-{i}", [rule], ttl_s=60)
            await client.delete_lease(sid, f"rt-{i}")
            trips.append(time.perf_counter() - started)
    return trips


async def _fill(client: object, count: int) -> None:
    """``count`` leases spread over 100 other sessions (as many sandboxes would)."""
    from airlock.client.proxy import ProxyClient

    assert isinstance(client, ProxyClient)
    if count <= 0:
        return
    sessions = [
        (await client.create_session(allow=["api.github.com"], ttl_s=3600)).session_id
        for _ in range(100)
    ]
    sem = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with sem:
            rule = {
                **RULE,
                "placeholder": f"airlock-gh-fill-{i:08d}",
                "replace": {"scheme": "bearer", "token": f"ghs_fill_{i:08d}"},
            }
            await client.put_lease(sessions[i % len(sessions)], f"fill-{i}", [rule], ttl_s=3600)

    await asyncio.gather(*(one(i) for i in range(count)))


async def _lookup_costs(leases: int) -> list[list[object]]:
    """The per-request store lookup in isolation (session + placeholder)."""
    from airlock.proxy.protocol import LeaseRule
    from airlock.proxy.store.base import LeaseRecord, SessionRecord, Store, hash_secret, now
    from airlock.proxy.store.memory import MemoryStore
    from airlock.proxy.store.redis import RedisStore

    async def fill(store: Store, count: int) -> None:
        await store.create_session(SessionRecord("s", hash_secret("x"), (), now() + 600))
        for i in range(count):
            rule = LeaseRule.model_validate({**RULE, "placeholder": f"airlock-gh-fill-{i:08d}"})
            await store.put_lease(LeaseRecord("s", f"l{i}", (rule,), now() + 600))

    async def measure(store: Store, n: int) -> list[float]:
        samples: list[float] = []
        for _ in range(n):
            started = time.perf_counter()
            await store.lookup("s", ["airlock-gh-fill-00000000"])
            samples.append(time.perf_counter() - started)
        return samples

    rows: list[list[object]] = []
    for count in (1, leases):
        mem = MemoryStore()
        await fill(mem, count)
        samples = await measure(mem, 20000)
        rows.append([f"memory, {count:,} leases", len(samples), _us(samples, 50), _us(samples, 99)])
    if shutil.which("redis-server"):
        from tests.fakes.redis_server import redis_server_sync

        with redis_server_sync() as redis:
            store = RedisStore(redis.url)
            await fill(store, 1)
            samples = await measure(store, 3000)
            await store.close()
        rows.append(["redis (loopback), 1 lease", len(samples), _us(samples, 50), _us(samples, 99)])
    return rows


def _us(samples: list[float], q: float) -> float:
    return percentile(samples, q) * 1e6


DOWNLOADS = [
    ("Content-Length", "&framing=cl&enc=identity"),
    ("chunked", "&framing=chunked&enc=identity"),
    ("chunked + gzip", "&framing=chunked&enc=gzip"),
]


async def _downloads(targets: list[Target], size: int, rounds: int) -> list[list[object]]:
    """Interleaved downloads through each target, each framing; the table's rows."""
    rows: list[list[object]] = []
    for label, query in DOWNLOADS:
        speeds: dict[str, list[float]] = {t.name: [] for t in targets}
        short: dict[str, int] = {t.name: 0 for t in targets}
        leaks: dict[str, int] = {t.name: 0 for t in targets}
        cpu: dict[str, list[float]] = {t.name: [] for t in targets}
        for _ in range(rounds):
            for t in targets:
                url = t.url.rsplit("/", 1)[0] + "/download"
                before = _cpu_s(t.cpu_pid)
                mbs, received, leaked = await _download(
                    url, t.proxy, t.proxy_headers, t.ca, size, query
                )
                # CPU time is robust to a loaded machine; MiB/s is not.
                cpu[t.name].append((_cpu_s(t.cpu_pid) - before) * 1000 / (size >> 20))
                speeds[t.name].append(mbs)
                # Placeholder and token differ in length: allow for that, not more.
                short[t.name] += received < size - size // 100
                leaks[t.name] += leaked if t.pid is not None else 0
        base = statistics.median(speeds[targets[0].name])
        base_cpu = min(cpu[targets[0].name])
        for t in targets:
            median = statistics.median(speeds[t.name])
            rows.append(
                [
                    label, t.name, size >> 20, rounds, f"{median:.1f}", short[t.name],
                    leaks[t.name] if t.pid is not None else "-", f"{median / base:.2f}x",
                    f"{min(cpu[t.name]):.2f}" if t.cpu_pid is not None else "-",
                    f"{min(cpu[t.name]) / base_cpu:.2f}x" if base_cpu and t.cpu_pid else "-",
                ]
            )  # fmt: skip
    return rows


DOWNLOAD_HEADERS = [
    "framing", "scenario", "MiB", "rounds", "MiB/s", "short", "leaks",
    "MiB/s vs (a)", "CPU ms/MiB", "CPU vs (a)",
]  # fmt: skip


def _print_downloads(rows: list[list[object]], size: int) -> None:
    print(
        f"Download of {size >> 20} MiB, incompressible, token echoed each MiB "
        "(median of interleaved rounds; leaks: real tokens the client received; "
        "CPU: the proxy process's user + system time per MiB, least of the rounds)"
    )
    print(
        table(
            DOWNLOAD_HEADERS,
            rows,
        )
    )
    print("target: (b) >= 0.8x of (a), 0 leaks")


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def _tunnel(t: Target, request: bytes) -> ssl.SSLSocket:
    """CONNECT api.github.com through ``t``, TLS, send ``request``, read its head."""
    import socket

    host, port = t.proxy.rsplit("/", 1)[1].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    auth = t.proxy_headers["Proxy-Authorization"]
    sock.sendall(
        f"CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n"
        f"Proxy-Authorization: {auth}\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    tls = ssl.create_default_context(cafile=t.ca).wrap_socket(
        sock, server_hostname="api.github.com"
    )
    tls.sendall(request)
    tls.recv(4096)
    return tls


def _tunnel_rss(t: Target, idle: int, stalled: int, size: int) -> list[list[object]]:
    """RSS the proxy adds per idle tunnel and per stalled download (KiB)."""
    assert t.pid is not None
    auth = f"Authorization: token {PLACEHOLDER}\r\n".encode()
    rows: list[list[object]] = []
    socks: list[ssl.SSLSocket] = []
    try:
        before = _rss(t.pid)
        for _ in range(idle):
            socks.append(
                _tunnel(t, b"GET /x HTTP/1.1\r\nHost: api.github.com\r\n" + auth + b"\r\n")
            )
        time.sleep(1)
        rows.append(
            [t.name, "idle (one request answered)", idle, (_rss(t.pid) - before) // idle >> 10]
        )
        before = _rss(t.pid)
        request = (
            (
                f"GET /download?size={size}&framing=cl&enc=identity HTTP/1.1\r\n"
                "Host: api.github.com\r\n"
            ).encode()
            + auth
            + b"\r\n"
        )
        for _ in range(stalled):
            socks.append(_tunnel(t, request))
        # Until RSS stops growing: the upstream is held back (or everything is buffered).
        last, steady = _rss(t.pid), 0
        while steady < 3:
            time.sleep(0.5)
            now = _rss(t.pid)
            steady = steady + 1 if abs(now - last) < (1 << 20) else 0
            last = now
        rows.append(
            [t.name, f"stalled ({size >> 20} MiB asked, none read)", stalled,
             (_rss(t.pid) - before) // stalled >> 10]
        )  # fmt: skip
    finally:
        for sock in socks:
            sock.close()
    return rows


def _print_tunnels(targets: list[Target], size: int) -> None:
    rows = [r for t in targets for r in _tunnel_rss(t, 50, 8, size)]
    print(table(["proxy RSS", "tunnels", "n", "KiB per tunnel"], rows))


async def run(
    seconds: float,
    leases: int,
    round_trips: int,
    rounds: int,
    download_mib: int = 200,
    download_only: bool = False,
    before: Path | None = None,
) -> None:
    work = Path(tempfile.mkdtemp(prefix="al-bench-"))
    notes: list[str] = []
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, work, True)
        up_port, ca = await start_upstream(stack, work)
        targets = [await _start_mitmdump(stack, work, up_port, ca.ca_path)]
        b, control, sid = await _start_airlock(
            stack, "(b) airlock, memory, 1 lease", work, up_port, ca.ca_path
        )
        targets.append(b)
        b0, _, _ = await _start_airlock(
            stack, "(b0) airlock as (b), guard off", work, up_port, ca.ca_path, guard=False
        )
        targets.append(b0)
        compared = [b0, b]
        if before is not None:
            bm, _, _ = await _start_airlock(
                stack, "(bm) airlock as (b), before", work, up_port, ca.ca_path, source=before
            )
            targets.append(bm)
            compared = [bm, b0, b]
        download_size = download_mib << 20
        if download_only:
            rows = await _downloads([targets[0], *compared], download_size, rounds)
            _print_downloads(rows, download_size)
            print()
            _print_tunnels(compared, download_size)
            return
        c, _, _ = await _start_airlock(
            stack, f"(c) airlock, memory, {leases:,} leases", work, up_port, ca.ca_path,
            extra_leases=leases,
        )  # fmt: skip
        targets.append(c)
        if shutil.which("redis-server"):
            from tests.fakes.redis_server import redis_server_sync

            redis = stack.enter_context(redis_server_sync())
            d, _, _ = await _start_airlock(
                stack, "(d) airlock, redis, 1 lease", work, up_port, ca.ca_path, store=redis.url
            )
            targets.append(d)
        else:
            notes.append("(d) skipped: redis-server not installed")
        # Interleave rounds so machine noise spreads over every scenario alike.
        for _ in range(rounds):
            for t in targets:
                rps, lat, errors = await _load(
                    t.url, t.proxy, t.proxy_headers, t.ca,
                    {"authorization": f"token {PLACEHOLDER}"}, seconds / rounds,
                )  # fmt: skip
                t.rps.append(rps)
                t.latencies.extend(lat)
                t.errors += errors
        trips = await _round_trips(control, sid, round_trips)
        download_rows = (
            await _downloads([targets[0], *compared], download_size, rounds)
            if download_mib > 0
            else []
        )
        tunnel_rows = [
            r
            for t in compared
            for r in await asyncio.to_thread(_tunnel_rss, t, 50, 8, download_size)
        ]

    def rps(t: Target) -> float:
        return statistics.median(t.rps)

    base, bt = targets[0], targets[1]
    rows: list[list[object]] = []
    for t in targets:
        rows.append(
            [
                t.name, rps(t), _ms(t.latencies, 50), _ms(t.latencies, 99), t.errors,
                f"{rps(base) / rps(t):.2f}x" if rps(t) else "-",
                f"{_ms(t.latencies, 50) / _ms(base.latencies, 50):.2f}x",
                f"{rps(bt) / rps(t):.2f}x" if t is not base and rps(t) else "-",
            ]
        )  # fmt: skip
    print(
        f"HTTPS GET through the proxy, keep-alive, {CONCURRENCY} concurrent clients, "
        f"{seconds:.0f}s per scenario in {rounds} interleaved rounds (median req/s); "
        "every airlock request is swapped"
    )
    print(
        table(
            [
                "scenario",
                "req/s",
                "p50 ms",
                "p99 ms",
                "errors",
                "time/req vs (a)",
                "p50 vs (a)",
                "time/req vs (b)",
            ],
            rows,
        )
    )
    print()
    print(
        table(
            ["lease PUT+DELETE round trip (unix socket, memory store)", "n", "p50 ms", "p99 ms"],
            [["ProxyClient.put_lease + delete_lease", len(trips), _ms(trips, 50), _ms(trips, 99)]],
        )
    )
    print()
    print(table(["store.lookup per request", "n", "p50 us", "p99 us"], await _lookup_costs(leases)))
    print("targets: (b)/(a) <= 1.15x, (c)/(b) <= 1.05x, round trip p50 < 2 ms")
    if download_rows:
        print()
        _print_downloads(download_rows, download_size)
    print_last_table(["proxy RSS", "tunnels", "n", "KiB per tunnel"], tunnel_rows, notes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench_proxy")
    parser.add_argument("--seconds", type=float, default=bench_seconds(5))
    parser.add_argument("--leases", type=int, default=10_000)
    parser.add_argument("--round-trips", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--download-mib", type=int, default=200, help="download table size (0: no download)"
    )
    parser.add_argument(
        "--download-only", action="store_true", help="only the download table ((a) and (b))"
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="also bench airlock-proxy from this source tree as (bm), the before of a change "
        "(e.g. git archive main | tar -x -C DIR)",
    )
    parser.add_argument(
        "--scopes",
        action="store_true",
        help="only the lease-scope table (allow vs none, push_refs vs none)",
    )
    args = parser.parse_args(argv if argv is not None else [])
    if args.scopes:
        from bench import bench_proxy_scopes

        asyncio.run(bench_proxy_scopes.run(args.seconds, args.rounds, args.rounds))
        return
    asyncio.run(
        run(
            args.seconds,
            args.leases,
            args.round_trips,
            args.rounds,
            args.download_mib,
            args.download_only,
            args.before,
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
