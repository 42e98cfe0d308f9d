"""Crash safety: SIGKILL a real airlockd mid-patch, again and again.

Multi-file patches (updates of four large files, a move, an add and a delete)
are sent in a loop, each taking the tree from generation g to g+1. The daemon
(its whole process group) is killed at a random moment, restarted on the same
state directory (start-up replays the journal), and the tree must then be
exactly generation g or exactly g+1: never a mix, never a temp file, never a
leftover journal.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

import pytest

from airlock.daemon.commit.journal import journal_root
from tests.daemon.apply_patch.helpers import patch, snapshot, temp_files
from tests.fakes.daemon_harness import running_daemon, sigkill_during

FILES = 4
LINES = 12_000
MARKERS = (100, 6_000, 11_900)
KILLS = 50


def _big(i: int, gen: int) -> str:
    lines = [f"file {i} line {n} " + "x" * 20 for n in range(LINES)]
    for m in MARKERS:
        lines[m] = f"file {i} marker {m} gen {gen}"
    return "\n".join(lines) + "\n"


def expected_tree(gen: int) -> dict[str, bytes | None]:
    tree: dict[str, bytes | None] = {"m": None, "adds": None}
    for i in range(FILES):
        tree[f"f{i}.txt"] = _big(i, gen).encode()
    tree[f"m/g{gen}.txt"] = f"moved at {gen}\n".encode()
    tree[f"adds/a{gen}.txt"] = f"added at {gen}\n".encode()
    return tree


def write_tree(root: Path, gen: int) -> None:
    for rel, data in expected_tree(gen).items():
        path = root / rel
        if data is None:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def step_patch(gen: int) -> str:
    body: list[str] = []
    for i in range(FILES):
        body.append(f"*** Update File: f{i}.txt")
        for m in MARKERS:
            body += ["@@", f"-file {i} marker {m} gen {gen}", f"+file {i} marker {m} gen {gen + 1}"]
    body += [
        f"*** Update File: m/g{gen}.txt",
        f"*** Move to: m/g{gen + 1}.txt",
        "@@",
        f"-moved at {gen}",
        f"+moved at {gen + 1}",
        f"*** Add File: adds/a{gen + 1}.txt",
        f"+added at {gen + 1}",
        f"*** Delete File: adds/a{gen}.txt",
    ]
    return patch(*body)


def current_generation(root: Path, gen: int) -> int:
    """``gen`` or ``gen + 1``, whichever the tree is exactly; fails on anything else."""
    tree = snapshot(root)
    for candidate in (gen, gen + 1):
        if tree == expected_tree(candidate):
            return candidate
    mixed = {k for k, v in tree.items() if expected_tree(gen).get(k) != v}
    raise AssertionError(f"tree is neither generation {gen} nor {gen + 1}; differing: {mixed}")


@pytest.mark.slow
async def test_sigkill_loop_leaves_each_patch_whole_or_absent(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    write_tree(ws, 0)
    base = Path(tempfile.mkdtemp(prefix="al-c-"))
    rng = random.Random(20261130)
    gen = 0
    kills = 0
    advanced = 0
    interrupted = 0
    try:
        while kills < KILLS:
            async with running_daemon(ws, base_dir=base) as daemon:
                # Start-up replayed any journal: the tree is whole, and clean.
                gen = current_generation(ws, gen)
                assert temp_files(ws) == []
                jroot = journal_root(daemon.state_dir, ws.resolve())
                assert not jroot.exists() or list(jroot.iterdir()) == []

                async def patch_forever() -> None:
                    nonlocal gen, advanced
                    async with daemon.client() as client:
                        while True:
                            await client.call(
                                "apply_patch", {"patch": step_patch(gen), "diagnostics": False}
                            )
                            gen += 1
                            advanced += 1

                await sigkill_during(daemon, patch_forever(), rng.uniform(0.0, 0.35))
                kills += 1
                if jroot.exists() and any(jroot.iterdir()):
                    interrupted += 1  # killed between the journal and the commit point
        async with running_daemon(ws, base_dir=base) as daemon:
            gen = current_generation(ws, gen)
            assert temp_files(ws) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"kills={kills} interrupted={interrupted} advanced={advanced}")
    assert kills == KILLS
    assert advanced > 0, "no patch ever completed; the kill window is too short"
    assert interrupted >= 5, f"only {interrupted} kills landed mid-commit; widen the window"
