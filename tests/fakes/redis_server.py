"""A real, throwaway ``redis-server`` on a free 127.0.0.1 port.

No persistence (``--save ''``, no AOF), its own temp dir, killed on exit. When
the binary is missing the test is skipped with a visible reason.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

import pytest

from tests.fakes.net import free_port as _free_port

T = TypeVar("T")


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen[bytes]
    directory: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start_redis() -> RedisServer:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    directory = Path(tempfile.mkdtemp(prefix="al-redis-"))
    port = _free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(directory),
            "--protected-mode", "yes",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    server = RedisServer(port=port, process=proc, directory=directory)
    deadline = time.monotonic() + 10
    while not _ping(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise RuntimeError("redis-server did not start")
        time.sleep(0.05)
    return server


@contextlib.contextmanager
def redis_server_sync() -> Iterator[RedisServer]:
    server = start_redis()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.directory, ignore_errors=True)


@contextlib.asynccontextmanager
async def redis_server() -> AsyncIterator[str]:
    """Yield the URL of a fresh redis-server; kill it on exit."""
    with redis_server_sync() as server:
        yield server.url


def reply(value: Awaitable[T] | T) -> T:
    """redis-py types every reply as ``Awaitable | value``; the sync client returns the value."""
    return cast(T, value)


def redis_contents(port: int) -> list[bytes]:
    """Every key name and every value in every data type (and each key's DUMP), as bytes.

    What a reader of the Redis server (a stolen snapshot, a replica) would see: the
    tests grep it for secrets that must never be stored in clear.
    """
    import redis as redis_sync

    r = redis_sync.Redis(port=port)
    out: list[bytes] = []
    try:
        for key in r.scan_iter(count=1000):
            out.append(key)
            kind = r.type(key)
            if kind == b"string":
                out.append(reply(r.get(key)) or b"")
            elif kind == b"set":
                out.extend(reply(r.smembers(key)))
            elif kind == b"hash":
                for k, v in reply(r.hgetall(key)).items():
                    out += [k, v]
            elif kind == b"list":
                out.extend(reply(r.lrange(key, 0, -1)))
            elif kind == b"zset":
                out.extend(reply(r.zrange(key, 0, -1)))
            elif kind == b"stream":
                for _, fields in reply(r.xrange(key)):
                    for k, v in fields.items():
                        out += [k, v]
            dumped = reply(r.dump(key))
            if dumped:
                out.append(dumped)
    finally:
        r.close()
    return out
