"""``file_search`` in every output mode under a directory-for-symlink swap, as root with --exec-user.

The attacker (``nobody``) exchanges ``ws/d`` with a symlink to a directory
under a root-only 0700 parent whose ``secret.txt`` (0600, root's) holds the
canary; the workspace's own ``d/secret.txt`` does not. Any row at all, in any
mode, therefore came from the root-only file: before the fix rg ran as root,
opened names while the swap was on, and ``count``/``files_with_matches`` rows
were only checked for a name inside the workspace. Now rg runs as the exec
user and every row is counted again on the bytes the resolver opened. Bounded
to a few seconds per resolver, the three modes and two search paths interleaved.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from tests.daemon.adversarial.conftest import outcome, under_swap
from tests.daemon.adversarial.rights_rig import rig

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")

RACE_S = 6.0
MODES = ("count", "files_with_matches", "content")


def _rows(mode: str, text: str) -> bool:
    """Whether an ``ok`` answer carries any row (the inside files never match)."""
    if mode == "count":
        return "counts=[]" not in text
    if mode == "files_with_matches":
        return "files=[]" not in text
    return "matches=[]" not in text


async def test_search_swap_never_answers_from_a_root_only_file(resolver: str) -> None:
    with rig() as r:
        async with under_swap(r, resolver) as c:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + RACE_S
            answers: list[tuple[str, str, str, str]] = []
            n = 0
            while loop.time() < deadline:
                mode = MODES[n % 3]
                path = "d" if n % 2 else "."
                args: dict[str, Any] = {
                    "pattern": r.canary,
                    "fixed_strings": True,
                    "output_mode": mode,
                    "path": path,
                }
                code, text = await outcome(lambda a=args: c.file_search(**a))  # type: ignore[misc]
                answers.append((mode, path, code, text))
                n += 1
    leaks = [a for a in answers if r.canary in a[3] or (a[2] == "ok" and _rows(a[0], a[3]))]
    assert not leaks, f"{len(leaks)} of {len(answers)} answers came from outside: {leaks[:3]}"
    done = {a[0] for a in answers if a[2] == "ok"}
    assert done == set(MODES), f"not every mode was answered: {answers[:6]}"
