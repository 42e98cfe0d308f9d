"""The artifacts quota holds while four execs spill at once, and every returned spill exists."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tests.daemon.adversarial.as_exec_user import daemon_as_root, needs_root
from tests.fakes.wait import pace

pytestmark = [needs_root]

QUOTA = 16 * 1024 * 1024
EACH = 12 * 1024 * 1024  # four of them are three times the quota
# Print, then wait until all four have printed: no spill needs room after a call returned.
SPILLER = (
    f"head -c {EACH} /dev/zero; touch done-$0; "
    "while [ $(ls | grep -c '^done-') -lt 4 ]; do sleep 0.01; done"
)


def spilled(artifacts: Path) -> int:
    total = 0
    for entry in os.scandir(artifacts):
        if entry.name.startswith("exec-"):
            try:
                total += entry.stat().st_size
            except FileNotFoundError:
                continue
    return total


async def test_concurrent_spills_stay_within_the_quota() -> None:
    args = ["--artifacts-quota-bytes", str(QUOTA)]
    async with daemon_as_root(args) as (d, c):
        peak = 0
        done = asyncio.Event()

        async def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, spilled(d.artifacts_dir))
                await pace(0.005)

        sampler = asyncio.create_task(sample())
        try:
            outs = await asyncio.gather(
                *(
                    c.exec(argv=["sh", "-c", SPILLER, str(n)], max_output_bytes=1000, timeout_s=60)
                    for n in range(4)
                )
            )
        finally:
            done.set()
            await sampler
        assert all(o.exit_code == 0 and o.stdout_truncated for o in outs), outs
        paths = [Path(o.spill_path) for o in outs if o.spill_path]
        assert len(paths) == 4
        assert all(p.exists() for p in paths), "a returned spill_path was already deleted"
        peak = max(peak, spilled(d.artifacts_dir))
        assert peak <= QUOTA, f"spills reached {peak / 2**20:.1f} MiB against a 16 MiB quota"
        # The quota was used, not refused: together the four filled most of it.
        assert sum(p.stat().st_size for p in paths) >= QUOTA // 2
