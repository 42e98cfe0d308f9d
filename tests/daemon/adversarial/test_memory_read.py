"""``file_read`` memory is bounded by the page it returns, not by the file.

A 64 MiB file with one emoji decodes to a 256 MiB UCS-4 string if read whole;
the streamed pager must keep the daemon's peak RSS far below that. The pager's
pages are also checked, byte for byte, against the whole-file path.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from airlock.daemon.errors import AirlockError
from airlock.daemon.text import decode, page_stream
from airlock.daemon.tools.read import _page_result, page_text
from tests.daemon.adversarial.conftest import daemon_for

MIB = 1 << 20


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


async def test_64_mib_file_with_one_emoji_costs_a_page_not_the_file(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    line = "a" * 99 + "\n"
    with open(ws / "big.txt", "w", encoding="utf-8") as handle:
        handle.write("\U0001f600 first line\n")
        written = len("\U0001f600 first line\n".encode())
        block = line * 10_000
        while written + len(block) <= 64 * MIB:
            handle.write(block)
            written += len(block)
    assert os.path.getsize(ws / "big.txt") <= 64 * MIB
    async with daemon_for(ws) as daemon, daemon.client() as client:
        before = _peak_rss(daemon.process.pid)
        first = await client.call("file_read", {"path": "big.txt", "limit": 50})
        last = await client.call("file_read", {"path": "big.txt", "offset": first["total_lines"]})
        after = _peak_rss(daemon.process.pid)
    assert first["content"].startswith("\U0001f600 first line\n")
    assert first["end_line"] == 50 and first["next_offset"] == 51
    assert last["content"] == line and last["next_offset"] is None
    grown = after - before
    print(f"peak RSS before {before / MIB:.1f} MiB, after {after / MIB:.1f} MiB")
    assert grown < 48 * MIB, f"reading a 64 MiB file raised peak RSS by {grown / MIB:.0f} MiB"


def _whole(data: bytes, offset: int, limit: int, budget: int) -> object:
    decoded = decode(data, path="f")
    return page_text("f", decoded.text, decoded.line_ending, decoded.bom, offset, limit, budget)


@pytest.mark.parametrize("seed", range(40))
def test_streamed_pages_equal_whole_file_pages(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    pieces = ["a", "bb", "\U0001f600", "é", " ", "\t", "\r", "\n", "\r\n", "xyz" * 20]
    text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 3000)))
    data = ("\ufeff" if rng.random() < 0.2 else "").encode() + text.encode()
    path = tmp_path / "f.txt"
    path.write_bytes(data)
    for _ in range(6):
        offset = rng.randint(1, max(1, text.count("\n") + 2))
        limit = rng.randint(1, 50)
        budget = rng.randint(1, 400)
        try:
            want: object = _whole(data, offset, limit, budget)
        except AirlockError as exc:
            want = (exc.code, exc.message)
        fd = os.open(path, os.O_RDONLY)
        try:
            got: object = _page_result("f", page_stream(fd, "f", offset, limit, budget, chunk=7))
        except AirlockError as exc:
            got = (exc.code, exc.message)
        finally:
            os.close(fd)
        assert got == want, (offset, limit, budget)
