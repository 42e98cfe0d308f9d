"""file_read's answer from the caches, on the event loop: the same answer, never a wait.

``read_cached`` answers a small file only when its lookup (``RESOLVE_CACHED``)
and its bytes (``preadv2(RWF_NOWAIT)``) are all in memory; otherwise it returns
None and the thread path answers. Whatever it answers must be exactly what
the thread path says, errors included, and it must step aside for anything
unusual (links out of the workspace, pages not in memory).
"""

from __future__ import annotations

import os
import random
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.errors import AirlockError
from airlock.daemon.tools import read
from airlock.daemon.workspace import Workspace

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32

pytestmark = pytest.mark.skipif(
    not getattr(os, "RWF_NOWAIT", 0), reason="no preadv2(RWF_NOWAIT) here: the path is off"
)


def _answer(fn: Any) -> tuple[str, Any]:
    try:
        result = fn()
    except AirlockError as exc:
        return "error", (exc.code, exc.message)
    if result is None:
        return "none", None
    return "ok", result.model_dump(mode="json")


def _populate(ws: Path, rng: random.Random) -> list[str]:
    names: list[str] = []
    for i in range(30):
        kind = rng.choice(["lf", "crlf", "bom", "no-final", "long-line", "empty", "binary"])
        lines = [f"line {n} " + "y" * rng.randint(0, 40) for n in range(rng.randint(0, 200))]
        text = "\n".join(lines)
        data = {
            "lf": (text + "\n").encode(),
            "crlf": (text.replace("\n", "\r\n") + "\r\n").encode(),
            "bom": b"\xef\xbb\xbf" + (text + "\n").encode(),
            "no-final": text.encode(),
            "long-line": ("z" * rng.randint(100, 3000) + "\nend\n").encode(),
            "empty": b"",
            "binary": b"\x00\x01\x02" * 50,
        }[kind]
        (ws / f"f{i}.txt").write_bytes(data)
        names.append(f"f{i}.txt")
    (ws / "img.png").write_bytes(PNG)
    (ws / "big.txt").write_bytes(b"b" * (read.INLINE_MAX_BYTES + 10) + b"\n")
    (ws / "dir").mkdir()
    (ws / "dir" / "inner.txt").write_text("inner\n")
    (ws / "link.txt").symlink_to("f0.txt")
    (ws / "dirlink").symlink_to("dir")
    os.mkfifo(ws / "fifo")
    return [*names, "img.png", "big.txt", "dir", "dir/inner.txt", "link.txt", "dirlink/inner.txt",
            "fifo", "missing.txt", "dir/../f1.txt", "./f2.txt"]  # fmt: skip


async def test_the_cached_answer_is_the_thread_paths_answer(
    in_process: Workspace, workspace_dir: Path, tmp_path: Path
) -> None:
    rng = random.Random(4242)
    outside = tmp_path / "outside.txt"
    outside.write_text("outside\n")
    (workspace_dir / "out-link.txt").symlink_to(outside)
    paths = [*_populate(workspace_dir, rng), "out-link.txt"]
    ctx = in_process.ctx
    answered = 0
    for _ in range(400):
        path = rng.choice(paths)
        offset = rng.choice([1, 1, 2, 5, 50, 400])
        limit = rng.choice([1, 3, 100, 2000])
        budget = rng.choice([10, 200, 5000, 50_000])
        args = (path, offset, limit, budget)
        fast = _answer(partial(read.read_cached, ctx, *args))
        slow = _answer(partial(read._resolve_and_read, ctx, path, [], *args[1:]))
        if fast[0] == "none":
            continue
        answered += 1
        assert fast == slow, (path, offset, limit, budget)
    # The property is not vacuous: most calls on small cached files were answered inline.
    assert answered > 200


async def test_it_steps_aside_for_what_it_does_not_handle(
    in_process: Workspace, workspace_dir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("outside\n")
    (workspace_dir / "out-link.txt").symlink_to(outside)
    (workspace_dir / "big.txt").write_bytes(b"b" * (read.INLINE_MAX_BYTES + 1))
    (workspace_dir / "a.txt").write_text("a\n")
    ctx = in_process.ctx
    for path in ["out-link.txt", "big.txt", "../outside.txt", str(workspace_dir / "a.txt")]:
        assert read.read_cached(ctx, path, 1, 2000, 50_000) is None, path
    # ...and the tool still answers them the full way.
    with pytest.raises(AirlockError) as info:
        await in_process.call("file_read", {"path": "out-link.txt"})
    assert info.value.code == "path_escape"


def _evict(path: Path) -> bool:
    """Drop ``path``'s pages from the page cache; False if this file system keeps them."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        try:
            os.preadv(fd, [bytearray(16)], 0, os.RWF_NOWAIT)
        except BlockingIOError:
            return True
        return False
    finally:
        os.close(fd)


async def test_pages_that_are_not_in_memory_go_to_the_thread(
    in_process: Workspace, workspace_dir: Path
) -> None:
    target = workspace_dir / "cold.txt"
    target.write_bytes(b"cold line\n" * 2000)
    if not _evict(target):
        pytest.skip("this file system keeps every page in memory (tmpfs): nothing to evict")
    assert read.read_cached(in_process.ctx, "cold.txt", 1, 2000, 50_000) is None
    page = await in_process.call("file_read", {"path": "cold.txt", "limit": 1})
    assert page.model_dump()["content"] == "cold line\n"
    # The thread's read brought the pages in: now the loop may answer.
    assert read.read_cached(in_process.ctx, "cold.txt", 1, 1, 50_000) is not None
