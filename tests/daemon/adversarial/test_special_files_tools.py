"""FIFOs, sockets, devices and links to /dev/zero under every file tool.

Each is refused at once (``invalid_request`` "not a regular file", or
``path_escape`` for a link leaving the workspace) or skipped by walks and
ignore-file loading; nothing blocks a worker thread, nothing reads an endless
device, and ``/v1/health`` keeps answering while every tool runs at once. The
health bound is a liveness bound (5 s), not a performance assertion.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

from airlock.daemon.errors import AirlockError
from tests.daemon.adversarial.conftest import daemon_for
from tests.fakes.wait import pace

CALL_BOUND_S = 60.0  # rg's own search timeout (30 s) is the slowest honest answer
HEALTH_BOUND_S = 5.0


@contextlib.contextmanager
def special_tree(ws: Path) -> Iterator[list[str]]:
    """The workspace's special files; yields the names every tool is pointed at."""
    (ws / "sub").mkdir(parents=True)
    (ws / "sub2").mkdir()
    (ws / "plain.txt").write_text("hello\n")
    (ws / "sub" / "x.txt").write_text("hello sub\n")
    (ws / "sub2" / "y.txt").write_text("hello sub2\n")
    os.mkfifo(ws / "fifo")
    os.mkfifo(ws / "sub" / ".gitignore")  # a FIFO named .gitignore
    (ws / ".gitignore").symlink_to("/dev/zero")  # .gitignore -> /dev/zero
    (ws / "sub2" / ".ignore").symlink_to("/dev/zero")
    (ws / "zero").symlink_to("/dev/zero")
    names = ["fifo", "sock", "zero"]
    try:
        os.mknod(ws / "chardev", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
        names.append("chardev")
    except PermissionError:
        pass  # a container without CAP_MKNOD: the FIFO and socket still cover the type check
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(ws / "sock"))
    server.listen(1)
    try:
        yield names
    finally:
        server.close()


def calls_for(name: str) -> list[tuple[str, dict[str, Any]]]:
    edit = {"path": name, "old_string": "a", "new_string": "b"}
    patch = f"*** Begin Patch\n*** Update File: {name}\n@@\n-a\n+b\n*** End Patch\n"
    return [
        ("file_read", {"path": name}),
        ("file_multi_read", {"paths": [name, "plain.txt"]}),
        ("file_list", {"path": name}),
        ("file_search", {"pattern": "hello", "path": name}),
        ("file_write", {"path": name, "content": "x\n"}),
        ("file_patch", edit),
        ("file_multi_patch", {"edits": [edit]}),
        ("apply_patch", {"patch": patch}),
        ("file_diff_preview", {"edits": [edit]}),
    ]


WALKS: list[tuple[str, dict[str, Any]]] = [
    ("file_list", {"path": ".", "depth": 4}),
    ("file_list", {"path": "sub", "depth": 4}),
    ("file_list", {"path": "sub2", "depth": 4}),
    ("file_search", {"pattern": "hello", "path": "sub2"}),
    ("file_search", {"pattern": "hello", "path": "."}),
    ("file_search", {"pattern": "hello", "path": "sub"}),
]


async def _health_loop(socket_path: Path, stop: asyncio.Event, worst: list[float]) -> None:
    conn = aiohttp.UnixConnector(path=str(socket_path))
    async with aiohttp.ClientSession(connector=conn) as http:
        while not stop.is_set():
            started = time.monotonic()
            async with http.get("http://airlockd/v1/health") as resp:
                assert resp.status == 200
            worst.append(time.monotonic() - started)
            await pace(0.05)


async def test_special_files_refused_or_skipped_under_every_tool(
    tmp_path: Path, resolver: str
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with special_tree(ws) as names:
        async with daemon_for(ws, resolver) as daemon, daemon.client() as client:
            stop = asyncio.Event()
            latencies: list[float] = []
            health = asyncio.create_task(_health_loop(daemon.socket, stop, latencies))
            results: dict[str, tuple[str, str]] = {}

            async def one(label: str, tool: str, args: dict[str, Any]) -> None:
                try:
                    out = await asyncio.wait_for(client.call(tool, args), CALL_BOUND_S)
                except AirlockError as exc:
                    results[label] = (str(exc.code), exc.message)
                else:
                    results[label] = ("ok", repr(out)[:500])

            jobs = [
                one(f"{tool}({name})", tool, args)
                for name in names
                for tool, args in calls_for(name)
            ] + [one(f"{tool}({args['path']})", tool, args) for tool, args in WALKS]
            await asyncio.gather(*jobs)
            stop.set()
            await health
            # The daemon still serves reads afterwards: no worker thread is stuck.
            for _ in range(12):
                assert (await client.call("file_read", {"path": "plain.txt"}))[
                    "content"
                ] == "hello\n"
    for name in names:
        for tool, _ in calls_for(name):
            code, message = results[f"{tool}({name})"]
            if tool == "file_multi_read":
                # Per-file errors inside a successful answer.
                want = "path_escape" if name == "zero" else "not a regular file"
                assert code == "ok" and want in message, (tool, name, message)
            elif name == "zero":
                assert code == "path_escape", (tool, name, code, message)
            else:
                assert code == "invalid_request", (tool, name, code, message)
                assert "not a regular file" in message, (tool, name, message)
    for tool, args in WALKS:
        code, message = results[f"{tool}({args['path']})"]
        if tool == "file_list":
            assert code == "ok", (tool, args, code, message)
        else:
            # rg itself opens ignore files: on a FIFO one it blocks, is seen stalled and
            # killed, and the answer names the file (invalid_request; see
            # test_search_fifo_ignore.py); either way an envelope or a result, never a hang.
            assert code in ("ok", "invalid_request"), (tool, args, code, message)
    # rg reads the root's .gitignore (a link to /dev/zero) itself: its memory limit stops
    # it, and the answer says so instead of passing for "no matches".
    code, message = results["file_search(.)"]
    assert "stopped early" in message and "include_ignored" in message, message
    assert max(latencies) < HEALTH_BOUND_S, f"health took {max(latencies):.2f} s"
