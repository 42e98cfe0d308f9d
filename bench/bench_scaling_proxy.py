"""How the proxy's lease store grows: 100 / 1,000 / 10,000 sessions with 1k / 10k / 100k leases.

The in-memory store the proxy uses (``MemoryStore``), filled with S sessions
of 10 leases each (one placeholder per lease); a request's lookup (its
session plus the placeholders it carries) is timed at random sessions, and
``tracemalloc`` gives the memory a session and a lease cost. The Redis store
keeps the same records in Redis: its lookup is a round trip whatever S is.
``BENCH_SCALE=small``: 100 / 1,000 sessions.
"""

from __future__ import annotations

import asyncio
import random
import time
import tracemalloc

from airlock.proxy.protocol import LeaseRule
from airlock.proxy.store.base import LeaseRecord, SessionRecord, hash_secret, now
from airlock.proxy.store.memory import MemoryStore
from bench import report

LEASES_PER_SESSION = 10
RULE = {
    "host": "api.github.com",
    "placeholder": "x",
    "schemes": ["token", "bearer"],
    "replace": {"scheme": "bearer", "token": "ghs_" + "r" * 36},
}


async def fill(sessions: int) -> tuple[MemoryStore, int, int]:
    """The store, and the bytes all sessions (without leases) and all leases cost."""
    tracemalloc.start()
    store = MemoryStore()
    secret = hash_secret("s")
    base = tracemalloc.get_traced_memory()[0]
    for s in range(sessions):
        await store.create_session(SessionRecord(f"s{s}", secret, (), now() + 3600))
    after_sessions = tracemalloc.get_traced_memory()[0]
    for s in range(sessions):
        for lease in range(LEASES_PER_SESSION):
            placeholder = f"airlock-gh-{s:06d}-{lease:02d}-" + "p" * 16
            rule = LeaseRule.model_validate({**RULE, "placeholder": placeholder})
            await store.put_lease(LeaseRecord(f"s{s}", f"l{lease}", (rule,), now() + 3600))
    after_leases = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return store, after_sessions - base, after_leases - after_sessions


async def run() -> None:
    sizes = report.steps([100, 1_000, 10_000], [100, 1_000])
    rows: list[list[object]] = []
    p50s: list[float] = []
    rng = random.Random(7)
    for sessions in sizes:
        store, session_bytes, lease_bytes = await fill(sessions)
        samples: list[float] = []
        for _ in range(20_000):
            s = rng.randrange(sessions)
            placeholder = f"airlock-gh-{s:06d}-{rng.randrange(LEASES_PER_SESSION):02d}-" + "p" * 16
            started = time.perf_counter()
            session, found = await store.lookup(f"s{s}", [placeholder])
            samples.append((time.perf_counter() - started) * 1e6)
            assert session is not None and found
        p50 = report.percentile(samples, 50)
        p50s.append(p50 / 1000)
        leases = sessions * LEASES_PER_SESSION
        rows.append(
            [
                sessions,
                leases,
                p50,
                report.percentile(samples, 99),
                session_bytes / sessions,
                lease_bytes / leases,
            ]
        )
    print("MemoryStore lookup (session + one placeholder), microseconds; memory in bytes")
    print(
        report.table(
            ["sessions", "leases", "lookup p50 us", "lookup p99 us", "B/session", "B/lease"],
            rows,
            title="proxy store",
        )
    )
    print(report.scaling_table("lookup p50 by sessions (10 leases each)", "sessions", sizes, p50s))


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
