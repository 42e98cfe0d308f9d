"""``file_search`` against a leased file, and its memory on a 64 MiB file.

Lease: a process of the exec user holds a write lease (``F_SETLEASE``,
``F_WRLCK``) on one workspace file. Any other ``open`` of that file waits for
the holder (up to ``lease-break-time``, 45 s), so before the fix every
search ran into the 30 s timeout. Now the leased file is left out with a
note naming it, and the rest is answered at once, in every output mode.

Memory: a content-mode search whose match sits on the last line of a 64 MiB
file used to re-read (and split) the whole file to check the row: +304 MiB of
daemon RSS. The bound is the contract's, like ``file_read``'s: at most 64 MiB
of peak growth (``VmHWM``), measured on the real daemon process.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import sys
from pathlib import Path

import pytest

from tests.daemon.adversarial.rights_rig import USER, rig
from tests.fakes.daemon_harness import running_daemon

HOLD = """
import fcntl, os, signal, sys
signal.signal(signal.SIGIO, signal.SIG_IGN)  # a lease break must not kill the holder
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
print("held", flush=True)
sys.stdin.read()
"""

# Generous: the answer takes well under a second; the point is "not the 30 s timeout".
ANSWER_S = 10.0


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
async def test_a_leased_file_is_skipped_with_a_note() -> None:
    nobody = pwd.getpwnam(USER)
    with rig() as r:
        leased = r.ws / "d" / "leased.txt"
        leased.write_text("needle in the held one\n")
        (r.ws / "d" / "free.txt").write_text("needle in a free file\n")
        for path in (leased, r.ws / "d" / "free.txt"):
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
        python = shutil.which("python3", path=os.defpath) or sys.executable
        holder = await asyncio.create_subprocess_exec(
            python, "-c", HOLD, str(leased),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
        )  # fmt: skip
        try:
            assert holder.stdout is not None
            assert await asyncio.wait_for(holder.stdout.readline(), 30) == b"held\n"
            async with (
                running_daemon(r.ws, base_dir=r.base, extra_args=r.daemon_args()) as d,
                d.client() as c,
            ):
                for mode in ("files_with_matches", "count", "content"):
                    out = await asyncio.wait_for(
                        c.file_search(pattern="needle", output_mode=mode), ANSWER_S
                    )
                    text = out.model_dump_json()
                    assert "d/free.txt" in text, (mode, text)
                    assert "held one" not in text and '"d/leased.txt"' not in text, text
                    assert out.note is not None and "d/leased.txt" in out.note, (mode, out)
                    assert "lease" in out.note, out.note
        finally:
            if holder.returncode is None:
                holder.kill()
            await holder.wait()


def _hwm_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


async def test_content_search_on_a_64_mib_file_stays_bounded(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    line = b"x" * 1023 + b"\n"
    size = 64 * 1024 * 1024
    with open(ws / "big.txt", "wb") as f:
        f.write(line * (size // len(line) - 1))
        f.write(b"needle" + b"y" * 1017 + b"\n")
    assert (ws / "big.txt").stat().st_size == size
    async with running_daemon(ws) as d, d.client() as c:
        await c.file_search(pattern="nothing-matches-this", output_mode="content")
        before = _hwm_kib(d.process.pid)
        out = await c.file_search(pattern="needle", output_mode="content")
        after = _hwm_kib(d.process.pid)
    assert out.matches and out.matches[0].path == "big.txt", out
    assert out.matches[0].line == size // len(line), out.matches[0]
    growth_mib = (after - before) / 1024
    assert growth_mib <= 64, f"peak RSS grew by {growth_mib:.0f} MiB for one search"
