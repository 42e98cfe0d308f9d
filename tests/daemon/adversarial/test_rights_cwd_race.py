"""``exec`` and ``process_start`` cwd under a directory-for-symlink swap, as root with --exec-user.

The attacker runs as the exec user (``nobody``) and exchanges ``ws/d`` with a
symlink to a directory under a root-only 0700 parent, as fast as it can.
Every call asks for ``cwd: "d"`` and runs ``cat canary.txt``. Before the fix
the child changed directory as root, by name, before dropping privileges, and
landed outside (about one call in ten); now it enters the directory the
resolver opened, from its descriptor, as the exec user, and checks where it
landed. The canary must never appear in any answer, under either resolver.
Bounded to a few seconds per resolver (the race showed within the first
second on main).
"""

from __future__ import annotations

import asyncio
import os

import pytest

from airlock.client.daemon import DaemonClient
from tests.daemon.adversarial.conftest import outcome, under_swap
from tests.daemon.adversarial.rights_rig import Rig, rig

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")

RACE_S = 5.0


async def _exec(c: DaemonClient) -> tuple[str, str]:
    return await outcome(lambda: c.exec(argv=["cat", "canary.txt"], cwd="d"))


async def _process(c: DaemonClient) -> tuple[str, str]:
    async def run() -> str:
        started = await c.process_start(argv=["cat", "canary.txt"], cwd="d")
        out = ""
        offset = 0
        for _ in range(50):
            got = await c.process_read(id=started.id, offset=offset, wait_ms=200)
            out += got.stdout + got.stderr
            offset = got.next_offset
            if not got.running:
                break
        return out

    return await outcome(run)


async def test_cwd_swap_never_runs_a_command_outside(resolver: str) -> None:
    with rig() as r:
        await _race(r, resolver)


async def _race(r: Rig, resolver: str) -> None:
    async with under_swap(r, resolver) as c:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RACE_S
        answers: list[tuple[str, str, str]] = []
        n = 0
        while loop.time() < deadline:
            kind, call = ("process", _process) if n % 4 == 3 else ("exec", _exec)
            code, text = await call(c)
            answers.append((kind, code, text))
            n += 1
    leaks = [a for a in answers if r.canary in a[2]]
    assert not leaks, f"{len(leaks)} of {len(answers)} calls ran outside the workspace: {leaks[:3]}"
    ran = [a for a in answers if "harmless" in a[2]]
    assert ran, f"no call ran in the real directory at all: {answers[:5]}"
    assert any(a[0] == "process" for a in ran) or len(answers) < 8, answers[:5]
