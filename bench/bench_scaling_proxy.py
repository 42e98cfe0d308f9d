"""How airlock-proxy grows: 100 / 1,000 / 10,000 sessions with 1k / 10k / 100k leases.

Three tables per run, each step S sessions of 10 leases (one placeholder each):

1. **Through the real proxy** (``airlock-proxy`` subprocess, memory store, a
   local TLS upstream standing in for api.github.com; see
   :mod:`bench.proxy_rig`). A fresh proxy per step; the sessions and leases are
   installed through the control API (Unix socket, ``ProxyClient``, 32 at a
   time), which is timed (leases per second). Then HTTPS requests carrying a
   placeholder that the proxy swaps (the upstream answers a digest of the
   Authorization it got, so every request is checked): *keep-alive*, on tunnels
   of 16 random sessions, each request a random session of those and a random
   one of its leases; and *new tunnel*, each request a random session of all S
   on a fresh connection (CONNECT, proxy auth, TLS, swap). Memory is the proxy
   process's RSS (``/proc/<pid>/status`` VmRSS) after a warm-up and after the
   fill: RSS includes allocator slack (freed memory the allocator keeps), so it
   is an upper bound of what the records cost. Last, DELETE of random sessions
   (what tearing down a sandbox costs).
2. **MemoryStore lookup** in process (the floor of the swap's store cost), with
   ``tracemalloc`` bytes per session and per lease.
3. **RedisStore lookup** against a real ``redis-server`` (values sealed, as
   the proxy runs with ``--store-key-file``), filled through ``put_lease`` 64 at
   a time; Redis's ``used_memory`` growth per session and per lease. A
   ``put_lease`` is a WATCH/MULTI check-and-set of about five round trips (a
   few hundred a second here), so a step that would take longer than
   ``REDIS_API_FILL_BUDGET_S`` at the rate the previous step measured is
   bulk-loaded instead: the same keys and sealed values, pipelined (the bench
   says so when it happens, and the row's ``fill`` column shows it).

``BENCH_SCALE=small``: 100 / 1,000 sessions. Each step prints its duration.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import ssl
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp

from airlock.client.proxy import ProxyClient
from airlock.proxy.protocol import LeaseRule
from airlock.proxy.store.base import LeaseRecord, SessionRecord, Store, hash_secret, now
from airlock.proxy.store.crypto import Sealer
from airlock.proxy.store.memory import MemoryStore
from airlock.proxy.store.redis import RedisStore
from bench import report
from bench.proxy_rig import HOST, auth_digest, proxy_headers, start_proxy, start_upstream

LEASES_PER_SESSION = 10
FILL_CONCURRENCY = 32
KEEPALIVE_SESSIONS = 16
KEEPALIVE_REQUESTS = 400
NEW_TUNNEL_REQUESTS = 300
DELETES = 50
MEMORY_LOOKUPS = 20_000
REDIS_LOOKUPS = 2_000
REDIS_FILL_CONCURRENCY = 64
# Past this, a Redis step is bulk-loaded instead of filled through put_lease.
REDIS_API_FILL_BUDGET_S = 40.0
TTL_S = 3600
URL = f"https://{HOST}/whoami"


def sid_of(s: int) -> str:
    return f"s{s:06d}"


def placeholder(s: int, lease: int) -> str:
    return f"airlock-gh-{s:06d}-{lease:02d}-" + "p" * 16


def real_token(s: int, lease: int) -> str:
    return f"ghs_{s:06d}{lease:02d}" + "r" * 28


def rule(s: int, lease: int) -> dict[str, Any]:
    return {
        "host": HOST,
        "placeholder": placeholder(s, lease),
        "schemes": ["token", "bearer"],
        "replace": {"scheme": "bearer", "token": real_token(s, lease)},
    }


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


async def bounded(jobs: Iterable[Callable[[], Awaitable[object]]], concurrency: int) -> None:
    """Run ``jobs`` with at most ``concurrency`` in flight (workers, not 100k tasks)."""
    it = iter(jobs)

    async def worker() -> None:
        for job in it:
            await job()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def ms(samples: list[float], q: float) -> float:
    return report.percentile(samples, q) * 1000


# --- 1. through the proxy ------------------------------------------------------------


@dataclass
class ProxyStep:
    sessions: int
    sessions_s: float
    leases_s: float
    keepalive: list[float]
    new_tunnel: list[float]
    deletes: list[float]
    rss_base: int
    rss_sessions: int
    rss_leases: int
    wall_s: float

    @property
    def leases(self) -> int:
        return self.sessions * LEASES_PER_SESSION


async def swap_request(
    http: aiohttp.ClientSession, proxy: str, headers: dict[str, str], s: int, lease: int
) -> float:
    """One swapped request; its latency in seconds (raises when the swap did not happen)."""
    started = time.perf_counter()
    async with http.get(
        URL,
        proxy=proxy,
        proxy_headers=headers,
        headers={"authorization": f"token {placeholder(s, lease)}"},
    ) as resp:
        body = await resp.text()
        status = resp.status
    elapsed = time.perf_counter() - started
    if status != 200 or body != auth_digest(f"Bearer {real_token(s, lease)}"):
        raise RuntimeError(f"request for session {s} lease {lease}: {status}, not swapped")
    return elapsed


async def proxy_step(work: Path, up_port: int, ca_path: Path, sessions: int) -> ProxyStep:
    started = time.monotonic()
    rng = random.Random(sessions)
    with ExitStack() as stack:
        proxy = start_proxy(stack, work, up_port, ca_path)
        assert proxy.process is not None
        pid = proxy.process.pid
        address = f"http://127.0.0.1:{proxy.port}"
        ctx = ssl.create_default_context(cafile=str(proxy.ca_path))
        async with ProxyClient(proxy.control) as client:
            # Warm-up on a session outside the S (TLS contexts, certificate cache,
            # audit file, mitmproxy's lazy imports) before the baseline.
            warm = await client.create_session(allow=[HOST], ttl_s=TTL_S, session_id="warm")
            await client.put_lease("warm", "w", [rule(999_999, 0)], ttl_s=TTL_S)
            warm_headers = proxy_headers(warm)
            conn = aiohttp.TCPConnector(ssl=ctx, force_close=True)
            async with aiohttp.ClientSession(connector=conn) as http:
                for _ in range(20):
                    await swap_request(http, address, warm_headers, 999_999, 0)
            rss_base = rss_bytes(pid)

            headers: dict[int, dict[str, str]] = {}

            async def create(s: int) -> None:
                info = await client.create_session(allow=[HOST], ttl_s=TTL_S, session_id=sid_of(s))
                headers[s] = proxy_headers(info)

            t0 = time.perf_counter()
            await bounded((partial(create, s) for s in range(sessions)), FILL_CONCURRENCY)
            sessions_s = time.perf_counter() - t0
            rss_sessions = rss_bytes(pid)

            async def put(s: int, lease: int) -> None:
                await client.put_lease(sid_of(s), f"l{lease}", [rule(s, lease)], ttl_s=TTL_S)

            t0 = time.perf_counter()
            await bounded(
                (
                    partial(put, s, lease)
                    for s in range(sessions)
                    for lease in range(LEASES_PER_SESSION)
                ),
                FILL_CONCURRENCY,
            )
            leases_s = time.perf_counter() - t0
            rss_leases = rss_bytes(pid)

            # Keep-alive: tunnels of a few random sessions, random session and lease per request.
            pool = rng.sample(range(sessions), KEEPALIVE_SESSIONS)
            https = {
                s: aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=1))
                for s in pool
            }
            keepalive: list[float] = []
            try:
                for s in pool:  # open the tunnels
                    await swap_request(https[s], address, headers[s], s, 0)
                for _ in range(KEEPALIVE_REQUESTS):
                    s = rng.choice(pool)
                    lease = rng.randrange(LEASES_PER_SESSION)
                    keepalive.append(await swap_request(https[s], address, headers[s], s, lease))
            finally:
                for h in https.values():
                    await h.close()

            # New tunnel per request, for a random session of all S.
            new_tunnel: list[float] = []
            conn = aiohttp.TCPConnector(ssl=ctx, force_close=True)
            async with aiohttp.ClientSession(connector=conn) as http:
                for _ in range(NEW_TUNNEL_REQUESTS):
                    s = rng.randrange(sessions)
                    lease = rng.randrange(LEASES_PER_SESSION)
                    new_tunnel.append(await swap_request(http, address, headers[s], s, lease))

            deletes: list[float] = []
            for s in rng.sample(range(sessions), min(DELETES, sessions)):
                t0 = time.perf_counter()
                await client.delete_session(sid_of(s))
                deletes.append(time.perf_counter() - t0)
    return ProxyStep(
        sessions,
        sessions_s,
        leases_s,
        keepalive,
        new_tunnel,
        deletes,
        rss_base,
        rss_sessions,
        rss_leases,
        time.monotonic() - started,
    )


def print_proxy(steps: list[ProxyStep]) -> None:
    sizes = [p.sessions for p in steps]
    print(
        f"airlock-proxy (memory store), {LEASES_PER_SESSION} leases per session; "
        f"keep-alive: {KEEPALIVE_REQUESTS} requests on tunnels of {KEEPALIVE_SESSIONS} random "
        f"sessions; new tunnel: {NEW_TUNNEL_REQUESTS} requests, each a random session on a "
        "fresh connection; every request swapped and checked"
    )
    print(
        report.table(
            [
                "sessions",
                "leases",
                "keep-alive p50 ms",
                "keep-alive p99 ms",
                "new tunnel p50 ms",
                "new tunnel p99 ms",
                "DELETE session p50 ms",
                "step s",
            ],
            [
                [
                    p.sessions,
                    p.leases,
                    ms(p.keepalive, 50),
                    ms(p.keepalive, 99),
                    ms(p.new_tunnel, 50),
                    ms(p.new_tunnel, 99),
                    ms(p.deletes, 50),
                    p.wall_s,
                ]
                for p in steps
            ],
            title="proxy at scale: swapped request latency",
        )
    )
    print()
    print("Install through the control API (Unix socket, ProxyClient, 32 in flight)")
    print(
        report.table(
            ["sessions", "leases", "sessions s", "sessions/s", "leases s", "leases/s"],
            [
                [
                    p.sessions,
                    p.leases,
                    p.sessions_s,
                    p.sessions / p.sessions_s,
                    p.leases_s,
                    p.leases / p.leases_s,
                ]
                for p in steps
            ],
            title="proxy at scale: install rate",
        )
    )
    print()
    growth = [p.rss_leases - p.rss_base for p in steps]
    exponent = report.growth_exponent(sizes, growth)
    print("Proxy RSS (VmRSS) growth from a warmed-up proxy to filled; includes allocator slack")
    print(
        report.table(
            [
                "sessions",
                "leases",
                "RSS base MiB",
                "growth MiB",
                "growth/session B",
                "growth/lease B",
                "sessions only B/session",
                "leases only B/lease",
            ],
            [
                [
                    p.sessions,
                    p.leases,
                    p.rss_base / 2**20,
                    g / 2**20,
                    g / p.sessions,
                    g / p.leases,
                    (p.rss_sessions - p.rss_base) / p.sessions,
                    (p.rss_leases - p.rss_sessions) / p.leases,
                ]
                for p, g in zip(steps, growth, strict=True)
            ],
            title="proxy at scale: memory",
        )
    )
    print(f"RSS growth exponent by sessions (log-log fit): {exponent:.2f}")
    report.figure(
        "proxy RSS growth exponent by sessions", exponent, unit="exponent", target="<= 1.0"
    )
    print()
    print(
        report.scaling_table(
            "proxy keep-alive swap p50 by sessions",
            "sessions",
            sizes,
            [ms(p.keepalive, 50) for p in steps],
        )
    )
    print(
        report.scaling_table(
            "proxy new-tunnel swap p50 by sessions",
            "sessions",
            sizes,
            [ms(p.new_tunnel, 50) for p in steps],
        )
    )
    print(
        report.scaling_table(
            "lease install (control API) by leases",
            "leases",
            [p.leases for p in steps],
            [p.leases_s * 1000 for p in steps],
        )
    )
    print(
        report.scaling_table(
            "DELETE session p50 by sessions",
            "sessions",
            sizes,
            [ms(p.deletes, 50) for p in steps],
        )
    )


# --- 2. and 3. store lookups ---------------------------------------------------------


def record(s: int, lease: int) -> LeaseRecord:
    return LeaseRecord(
        sid_of(s), f"l{lease}", (LeaseRule.model_validate(rule(s, lease)),), now() + TTL_S
    )


async def fill_store(store: Store, sessions: int, concurrency: int) -> tuple[float, float]:
    """Seconds to put the sessions, and the leases."""
    secret = hash_secret("s")

    async def session(s: int) -> None:
        await store.create_session(SessionRecord(sid_of(s), secret, (HOST,), now() + TTL_S))

    async def lease(s: int, n: int) -> None:
        await store.put_lease(record(s, n))

    t0 = time.perf_counter()
    await bounded((partial(session, s) for s in range(sessions)), concurrency)
    t1 = time.perf_counter()
    await bounded(
        (partial(lease, s, n) for s in range(sessions) for n in range(LEASES_PER_SESSION)),
        concurrency,
    )
    return t1 - t0, time.perf_counter() - t1


async def lookups(store: Store, sessions: int, count: int, rng: random.Random) -> list[float]:
    samples: list[float] = []
    for _ in range(count):
        s = rng.randrange(sessions)
        ph = placeholder(s, rng.randrange(LEASES_PER_SESSION))
        started = time.perf_counter()
        session, found = await store.lookup(sid_of(s), [ph])
        samples.append(time.perf_counter() - started)
        if session is None or ph not in found:
            raise RuntimeError(f"lookup of session {s} missed")
    return samples


async def memory_step(sessions: int) -> tuple[list[object], float]:
    """(row, lookup p50 in us)."""
    started = time.monotonic()
    tracemalloc.start()
    store = MemoryStore()
    base = tracemalloc.get_traced_memory()[0]
    secret = hash_secret("s")
    for s in range(sessions):
        await store.create_session(SessionRecord(sid_of(s), secret, (HOST,), now() + TTL_S))
    after_sessions = tracemalloc.get_traced_memory()[0]
    for s in range(sessions):
        for n in range(LEASES_PER_SESSION):
            await store.put_lease(record(s, n))
    after_leases = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    samples = await lookups(store, sessions, MEMORY_LOOKUPS, random.Random(7))
    leases = sessions * LEASES_PER_SESSION
    p50 = report.percentile(samples, 50) * 1e6
    row: list[object] = [
        sessions,
        leases,
        p50,
        report.percentile(samples, 99) * 1e6,
        (after_sessions - base) / sessions,
        (after_leases - after_sessions) / leases,
        time.monotonic() - started,
    ]
    return row, p50


async def bulk_load(store: RedisStore, sessions: int) -> None:
    """Write what ``create_session`` + ``put_lease`` write (same keys, sealed values,
    expiries), pipelined without the per-lease check-and-set round trips."""
    secret = hash_secret("s")
    redis: Any = store._redis
    px = TTL_S * 1000
    for first in range(0, sessions, 500):
        pipe = redis.pipeline(transaction=False)
        for s in range(first, min(sessions, first + 500)):
            sid = sid_of(s)
            session = SessionRecord(sid, secret, (HOST,), now() + TTL_S)
            pipe.set(store._s(sid), store._seal(store._s(sid), session.to_json()), px=px)
            for n in range(LEASES_PER_SESSION):
                lease = record(s, n)
                key = store._l(sid, lease.lease_id)
                pipe.set(key, store._seal(key, lease.to_json()), px=px)
                for ph in lease.placeholders:
                    entry = lease.entry_for(ph).to_json()
                    pipe.set(store._ph(ph), store._seal(store._ph(ph), entry), px=px)
                pipe.sadd(store._sl(sid), lease.lease_id)
            pipe.pexpire(store._sl(sid), px)
        await pipe.execute()
    # The store reads back what was written, as it would its own.
    listed = await store.list_leases(sid_of(sessions - 1))
    if len(listed) != LEASES_PER_SESSION:
        raise RuntimeError(f"bulk load: {len(listed)} leases listed, not {LEASES_PER_SESSION}")


async def redis_step(
    url: str, sessions: int, api_rate: float | None
) -> tuple[list[object], float, float | None]:
    """(row, lookup p50 in us, put_lease/s or None when bulk-loaded); ``api_rate``
    (put_lease/s of the previous step) decides how to fill."""
    import redis.asyncio as aioredis

    started = time.monotonic()
    leases = sessions * LEASES_PER_SESSION
    bulk = api_rate is not None and leases / api_rate > REDIS_API_FILL_BUDGET_S
    if bulk:
        assert api_rate is not None
        print(
            f"  redis: {leases:,} leases through put_lease would take ~{leases / api_rate:.0f}s "
            f"at the {api_rate:.0f}/s just measured (each put is a WATCH/MULTI check-and-set, "
            f"about 5 round trips); bulk-loading the same keys instead",
            flush=True,
        )
    admin: Any = aioredis.Redis.from_url(url)
    store = RedisStore(url, sealer=Sealer([os.urandom(32)]))
    try:
        await admin.flushdb()
        base = int((await admin.info("memory"))["used_memory"])
        t0 = time.perf_counter()
        rate: float | None = None
        if bulk:
            await bulk_load(store, sessions)
        else:
            _, leases_s = await fill_store(store, sessions, REDIS_FILL_CONCURRENCY)
            rate = leases / leases_s
        fill_s = time.perf_counter() - t0
        filled = int((await admin.info("memory"))["used_memory"])
        samples = await lookups(store, sessions, REDIS_LOOKUPS, random.Random(7))
    finally:
        await store.close()
        await admin.aclose()
    p50 = report.percentile(samples, 50) * 1e6
    row: list[object] = [
        sessions,
        leases,
        "bulk pipeline" if bulk else "put_lease",
        "-" if rate is None else rate,
        p50,
        report.percentile(samples, 99) * 1e6,
        (filled - base) / sessions,
        (filled - base) / leases,
        fill_s,
        time.monotonic() - started,
    ]
    return row, p50, rate


async def run() -> None:
    sizes = report.steps([100, 1_000, 10_000], [100, 1_000])
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")

    work = Path(tempfile.mkdtemp(prefix="al-bsp-"))
    steps: list[ProxyStep] = []
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, work, True)
        up_port, ca = await start_upstream(stack, work)
        for sessions in sizes:
            step = await proxy_step(work, up_port, ca.ca_path, sessions)
            print(f"  proxy step {sessions:,} sessions: {step.wall_s:.1f}s", flush=True)
            steps.append(step)
    print_proxy(steps)

    print()
    memory_rows: list[list[object]] = []
    memory_p50s: list[float] = []
    for sessions in sizes:
        row, p50 = await memory_step(sessions)
        print(f"  memory store step {sessions:,} sessions: {row[-1]:.1f}s", flush=True)
        memory_rows.append(row)
        memory_p50s.append(p50)
    print("MemoryStore.lookup in process (session + one placeholder); tracemalloc bytes")
    print(
        report.table(
            [
                "sessions",
                "leases",
                "lookup p50 us",
                "lookup p99 us",
                "B/session",
                "B/lease",
                "step s",
            ],
            memory_rows,
            title="proxy store: memory",
        )
    )
    print(
        report.scaling_table(
            "MemoryStore lookup p50 by sessions",
            "sessions",
            sizes,
            [p / 1000 for p in memory_p50s],
        )
    )

    print()
    if shutil.which("redis-server") is None:
        print("RedisStore table skipped: redis-server is not installed")
        return
    from tests.fakes.redis_server import redis_server_sync

    redis_rows: list[list[object]] = []
    redis_p50s: list[float] = []
    api_rate: float | None = None
    with redis_server_sync() as server:
        for sessions in sizes:
            row, p50, rate = await redis_step(server.url, sessions, api_rate)
            api_rate = rate or api_rate
            print(f"  redis store step {sessions:,} sessions: {row[-1]:.1f}s", flush=True)
            redis_rows.append(row)
            redis_p50s.append(p50)
    print(
        f"RedisStore.lookup (one MGET, sealed values) against a local redis-server; filled "
        f"through put_lease ({REDIS_FILL_CONCURRENCY} in flight) unless that would take more "
        f"than {REDIS_API_FILL_BUDGET_S:.0f}s; Redis used_memory growth"
    )
    print(
        report.table(
            [
                "sessions",
                "leases",
                "fill",
                "put_lease/s",
                "lookup p50 us",
                "lookup p99 us",
                "growth/session B",
                "growth/lease B",
                "fill s",
                "step s",
            ],
            redis_rows,
            title="proxy store: redis",
        )
    )
    print(
        report.scaling_table(
            "RedisStore lookup p50 by sessions",
            "sessions",
            sizes,
            [p / 1000 for p in redis_p50s],
        )
    )
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
