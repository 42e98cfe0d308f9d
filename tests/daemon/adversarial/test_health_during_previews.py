"""``/v1/health`` stays under 100 ms p99 while eight read-scope ``file_diff_preview`` calls run.

A latency bound as a contract property, not a benchmark: the orchestrator's
liveness probe (and every other caller) must not starve behind one agent's
CPU-heavy previews, which a read-scope token may send freely. Before the fix
each preview ran on its own thread and eight of them held the GIL against the
event loop: health p99 was 545-725 ms. CPU-heavy work now shares a bounded
pool, so the loop competes with at most that many threads.

Measured generously: health is polled over its own connection from this
process for as long as the previews run (a few hundred samples), and the
bound is the contract's 100 ms on the 99th percentile, on a shared CI machine.
"""

from __future__ import annotations

import asyncio
import time

from airlock.client.daemon import DaemonClient
from tests.daemon.adversarial.agent_rig import READ, agent_daemon
from tests.daemon.adversarial.as_exec_user import needs_root
from tests.fakes.wait import pace

pytestmark = needs_root

PREVIEWS = 8
P99_BOUND_S = 0.100
# Repetitive lines with no unique anchor: the diff's costly case, within its budget
# (about a second of CPU each here).
LINES = 4000
OLD = "".join(f"value = {i % 300}\n" for i in range(LINES))
NEW = "".join(f"value = {(i * 7) % 300}\n" for i in range(LINES))


async def _preview(client: DaemonClient, n: int) -> None:
    out = await client.call(
        "file_diff_preview",
        {"edits": [{"path": f"f{n}.txt", "old_string": OLD, "new_string": NEW}]},
    )
    diff = out["files"][0]["diff"]
    # A full diff, or its summary if the diff ran past its time budget under this load.
    assert diff.startswith((f"--- a/f{n}.txt", "file rewritten")), diff[:80]


async def test_health_p99_under_100ms_with_eight_previews_in_flight() -> None:
    async with agent_daemon() as rig:
        for n in range(PREVIEWS):
            (rig.workspace / f"f{n}.txt").write_text(OLD)
        samples: list[float] = []
        async with DaemonClient(socket=str(rig.daemon.socket)) as probe:
            await probe.health()  # the probe's connection is open before the load starts
            clients = [DaemonClient(socket=str(rig.daemon.socket), token=READ) for _ in range(8)]
            for c in clients:
                await c.__aenter__()
            try:
                load = asyncio.gather(*(_preview(c, n) for n, c in enumerate(clients)))
                started = time.monotonic()
                while not load.done():
                    t0 = time.monotonic()
                    assert (await probe.health()).status == "ok"
                    samples.append(time.monotonic() - t0)
                    await pace(0.005)  # a probe's pacing
                await load
                busy_s = time.monotonic() - started
            finally:
                for c in clients:
                    await c.__aexit__(None, None, None)
        samples.sort()
        p99 = samples[int(len(samples) * 0.99) - 1] if len(samples) >= 100 else samples[-1]
        assert len(samples) >= 20, f"only {len(samples)} health samples in {busy_s:.1f} s"
        assert p99 < P99_BOUND_S, (
            f"health p99 {p99 * 1000:.0f} ms (max {samples[-1] * 1000:.0f} ms, "
            f"{len(samples)} samples over {busy_s:.1f} s of previews)"
        )
