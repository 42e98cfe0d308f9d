"""A FIFO named .gitignore, .ignore or .rgignore under file_search: a clear answer, not a hang.

rg opens ignore files itself and blocks on a FIFO (in ``open`` with no writer, in
``read`` when some process holds the FIFO open for writing and writes nothing).
The daemon sees the stalled thread, kills rg and answers ``invalid_request``
naming the file, well before the 30 s search timeout; ``include_ignored=true``
(no ignore files read) still searches. The client deadline below is a liveness
bound, half the search timeout, not a speed assertion.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.errors import AirlockError
from airlock.daemon.search.ignore import IGNORE_FILE_NAMES
from tests.daemon.adversarial.conftest import daemon_for

DEADLINE_S = 15.0  # the search timeout is 30 s: an answer before this one is not the timeout


@contextlib.contextmanager
def fifo_tree(ws: Path, name: str, writer: bool) -> Iterator[None]:
    (ws / "sub" / "deeper").mkdir(parents=True)
    (ws / "top.txt").write_text("needle top\n")
    (ws / "sub" / "deeper" / "x.txt").write_text("needle deep\n")
    os.mkfifo(ws / "sub" / name)
    # A writer that never writes: rg's open succeeds and its read waits instead.
    fd = os.open(ws / "sub" / name, os.O_RDWR | os.O_NONBLOCK) if writer else None
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def engine_children(pid: int) -> list[str]:
    """The daemon's live child processes (a stalled rg would be one)."""
    kids: list[str] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            kids += Path(f"/proc/{pid}/task/{task}/children").read_text().split()
    return kids


@pytest.mark.parametrize(
    ("name", "writer"),
    [*((n, False) for n in IGNORE_FILE_NAMES), (".gitignore", True)],
)
async def test_fifo_ignore_file_is_named_not_waited_on(
    tmp_path: Path, resolver: str, name: str, writer: bool
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with fifo_tree(ws, name, writer):
        async with daemon_for(ws, resolver) as daemon, daemon.client() as client:
            # rg reads the ignore files of the directories above the one it searches, too.
            for path in (".", "sub", "sub/deeper"):
                with pytest.raises(AirlockError) as caught:
                    await bounded(client.call("file_search", {"pattern": "needle", "path": path}))
                err = caught.value
                assert err.code == "invalid_request", (path, err.code, err.message)
                assert f"sub/{name}" in err.message, err.message
                assert "include_ignored=true" in err.message, err.message
                assert err.details.get("found") == [f"sub/{name}"], err.details
            # The engine was killed, not left waiting on the FIFO.
            assert engine_children(daemon.process.pid) == []
            # No ignore file is read with include_ignored: the search answers in full.
            out = await bounded(
                client.call("file_search", {"pattern": "needle", "include_ignored": True})
            )
            assert out["files"] == ["sub/deeper/x.txt", "top.txt"], out
            # A search that never meets the FIFO is untouched.
            (ws / "other").mkdir()
            (ws / "other" / "y.txt").write_text("needle other\n")
            out = await bounded(client.call("file_search", {"pattern": "needle", "path": "other"}))
            assert out["files"] == ["other/y.txt"] and out["total"] == 1, out


async def bounded(call: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    return await asyncio.wait_for(call, DEADLINE_S)
