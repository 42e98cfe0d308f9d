"""Recovery trusts nothing in a journal, and file_multi_patch survives SIGKILL whole or absent.

The state dir is the daemon's, but a bad layout (it used to sit inside the
workspace under ``make run``) or any bug would let an agent plant a journal.
Every field of the planted journals below is forged; the daemon must still
start, change nothing outside its roots, never set a mode bit beyond 0o777,
sweep only regular temp files inside its roots, and leave what it cannot verify.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import stat
import tempfile
from pathlib import Path
from typing import Any

from airlock.daemon.commit.journal import MANIFEST, journal_root
from airlock.daemon.fsio import TEMP_MARKER
from tests.daemon.adversarial.conftest import tree_digest
from tests.fakes.daemon_harness import running_daemon, sigkill_during


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _journal(jroot: Path, name: str, entries: list[dict[str, Any]], **extra: Any) -> Path:
    directory = jroot / name
    directory.mkdir(parents=True)
    manifest = {
        "version": 1,
        "full": True,
        "pid": 1,
        "entries": entries,
        "created_dirs": [],
        "roots": ["/"],
        **extra,
    }
    (directory / MANIFEST).write_text(json.dumps(manifest))
    return directory


async def test_forged_journals_change_nothing_outside(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "victim.txt").write_text("mine\n")
    (outside / "empty-dir").mkdir()
    (outside / f"{TEMP_MARKER}0123456789ab-victim.txt").write_text("not yours\n")
    (ws / "escape").symlink_to(outside)
    (ws / "inside.txt").write_text("after\n")
    os.mkfifo(ws / f"{TEMP_MARKER}aaaaaaaaaaaa-fifo")
    (ws / f"{TEMP_MARKER}bbbbbbbbbbbb-leftover").write_text("swept\n")
    canary = tree_digest(outside)

    base = Path(tempfile.mkdtemp(prefix="al-j-"))
    try:
        jroot = journal_root(base / "state", ws.resolve())
        evil = b"evil\n"
        mine = _sha(b"mine\n")
        # 1. an outside target, with the journal's own "roots" claiming "/".
        one = _journal(
            jroot,
            "1-outside",
            [
                {
                    "target": str(outside / "victim.txt"),
                    "before": "before-0",
                    "before_sha256": _sha(evil),
                    "after_sha256": mine,
                    "mode": 0o6777,
                }
            ],
        )
        (one / "before-0").write_bytes(evil)
        # 2. a target inside the workspace only through a symlink that leads out.
        two = _journal(
            jroot,
            "2-symlinked",
            [
                {
                    "target": str(ws / "escape" / "victim.txt"),
                    "before": "before-0",
                    "before_sha256": _sha(evil),
                    "after_sha256": mine,
                    "mode": 0o644,
                }
            ],
            created_dirs=[str(outside / "empty-dir")],
        )
        (two / "before-0").write_bytes(evil)
        # 3. a before-image named by an absolute path (and one by a climbing path).
        _journal(
            jroot,
            "3-absolute-before",
            [
                {
                    "target": str(ws / "inside.txt"),
                    "before": str(outside / "victim.txt"),
                    "before_sha256": mine,
                    "after_sha256": _sha(b"after\n"),
                    "mode": 0o644,
                },
                {
                    "target": str(ws / "inside.txt"),
                    "before": "../../outside/victim.txt",
                    "before_sha256": mine,
                    "after_sha256": _sha(b"after\n"),
                    "mode": 0o644,
                },
            ],
        )
        # 4. a before-image that is a symlink to an outside file.
        four = _journal(
            jroot,
            "4-linked-before",
            [
                {
                    "target": str(ws / "inside.txt"),
                    "before": "before-0",
                    "before_sha256": mine,
                    "after_sha256": _sha(b"after\n"),
                    "mode": 0o644,
                }
            ],
        )
        (four / "before-0").symlink_to(outside / "victim.txt")
        # 5. a FIFO named journal.json (would block a plain open forever).
        (jroot / "5-fifo").mkdir(parents=True)
        os.mkfifo(jroot / "5-fifo" / MANIFEST)
        # 6. a journal directory that is a symlink to an outside one.
        (outside / "jdir").mkdir()
        (outside / "jdir" / MANIFEST).write_text("{}")
        (jroot / "6-linked-dir").symlink_to(outside / "jdir")
        canary = tree_digest(outside)
        # 7. a verifiable journal with a setuid mode: restored, but never beyond 0o777;
        #    its sweep removes the regular temp file and leaves the temp-named FIFO.
        restored = b"before\n"
        seven = _journal(
            jroot,
            "7-setuid",
            [
                {
                    "target": str(ws.resolve() / "inside.txt"),
                    "before": "before-0",
                    "before_sha256": _sha(restored),
                    "after_sha256": _sha(b"after\n"),
                    "mode": 0o6777,
                }
            ],
        )
        (seven / "before-0").write_bytes(restored)

        async with running_daemon(ws, base_dir=base) as daemon, daemon.client() as client:
            assert (await client.health()).status == "ok"
            log = daemon.log()
        assert tree_digest(outside) == canary
        assert (outside / "victim.txt").read_text() == "mine\n"
        inside = ws / "inside.txt"
        assert inside.read_bytes() == restored
        assert stat.S_IMODE(inside.stat().st_mode) & ~0o777 == 0
        assert stat.S_ISFIFO(os.lstat(ws / f"{TEMP_MARKER}aaaaaaaaaaaa-fifo").st_mode)
        assert not (ws / f"{TEMP_MARKER}bbbbbbbbbbbb-leftover").exists()
        left = sorted(p.name for p in jroot.iterdir())
        # What could not be verified is left for a human, and logged.
        for name in ("1-outside", "2-symlinked", "3-absolute-before", "4-linked-before"):
            assert name in left, left
        assert "7-setuid" not in left
        assert "cannot be verified" in log
    finally:
        shutil.rmtree(base, ignore_errors=True)


FILES = 10


def _content(i: int, gen: int) -> str:
    return f"file {i}\n" + "pad line\n" * 2000 + f"gen {gen}\n"


def _generation(ws: Path, gen: int) -> int:
    """``gen`` or ``gen + 1`` if every file agrees, else the test fails (a torn call)."""
    seen = {(ws / f"f{i}.txt").read_text() for i in range(FILES)}
    for candidate in (gen, gen + 1):
        if seen == {_content(i, candidate) for i in range(FILES)} or all(
            (ws / f"f{i}.txt").read_text() == _content(i, candidate) for i in range(FILES)
        ):
            return candidate
    gens = [(ws / f"f{i}.txt").read_text().rsplit("gen ", 1)[1].strip() for i in range(FILES)]
    raise AssertionError(f"file_multi_patch was torn by the kill: generations {gens}")


async def test_sigkill_mid_file_multi_patch_is_whole_or_absent(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(FILES):
        (ws / f"f{i}.txt").write_text(_content(i, 0))
    base = Path(tempfile.mkdtemp(prefix="al-k-"))
    rng = random.Random(1130)
    gen = 0
    advanced = kills = 0
    try:
        for _ in range(12):
            async with running_daemon(ws, base_dir=base) as daemon:
                gen = _generation(ws, gen)
                assert not [p for p in ws.iterdir() if p.name.startswith(TEMP_MARKER)]

                async def patch_forever() -> None:
                    nonlocal gen, advanced
                    async with daemon.client() as client:
                        while True:
                            edits = [
                                {
                                    "path": f"f{i}.txt",
                                    "old_string": f"gen {gen}\n",
                                    "new_string": f"gen {gen + 1}\n",
                                }
                                for i in range(FILES)
                            ]
                            await client.call(
                                "file_multi_patch", {"edits": edits, "diagnostics": False}
                            )
                            gen += 1
                            advanced += 1

                await sigkill_during(daemon, patch_forever(), rng.uniform(0.05, 0.4))
                kills += 1
        async with running_daemon(ws, base_dir=base):
            gen = _generation(ws, gen)
            assert not [p for p in ws.iterdir() if p.name.startswith(TEMP_MARKER)]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"kills={kills} advanced={advanced} final generation={gen}")
    assert advanced > 0


async def test_killed_file_write_leaves_no_temp_file_after_restart(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    base = Path(tempfile.mkdtemp(prefix="al-w-"))
    big = "x" * (8 << 20)
    try:
        for round_ in range(6):
            async with running_daemon(ws, base_dir=base) as daemon:
                assert not [p for p in ws.iterdir() if p.name.startswith(TEMP_MARKER)]

                async def write_forever() -> None:
                    async with daemon.client() as client:
                        for n in range(1000):
                            await client.call(
                                "file_write",
                                {"path": f"w{n % 3}.txt", "content": big, "diagnostics": False},
                            )

                worker = asyncio.create_task(write_forever())
                await asyncio.sleep(0.2 + 0.1 * round_)  # the point: a kill time per round
                os.killpg(daemon.process.pid, signal.SIGKILL)
                await daemon.process.wait()
                worker.cancel()
                with contextlib.suppress(BaseException):
                    await worker
        async with running_daemon(ws, base_dir=base):
            assert not [p for p in ws.iterdir() if p.name.startswith(TEMP_MARKER)]
    finally:
        shutil.rmtree(base, ignore_errors=True)
