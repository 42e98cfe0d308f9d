"""A TLS echo upstream on 127.0.0.1, in its own thread and event loop.

It plays "api.github.com", "github.com" or any other host (the proxy reaches it
through ``--resolve``) and reports what actually arrived: every request is
recorded in :attr:`EchoUpstream.requests`, and the response echoes the
``Authorization`` header back in a header (``X-Echo-Authorization``) and in the
JSON body, so scrubbing can be tested. ``?gzip=1`` gzips the body; ``?big=N`` sends N bytes repeating the
Authorization value every ~1 KiB (a streamed body).
``/ws`` is a WebSocket that first sends the upgrade request's Authorization.

Running in a thread lets tests use blocking clients (curl, git, http.client)
without starving the server.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from aiohttp import web

from tests.fakes.loop_thread import ThreadedServer
from tests.fakes.tls import TestCA


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    host: str
    headers: list[tuple[str, str]]

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def one(self, name: str) -> str | None:
        values = self.all(name)
        return values[0] if len(values) == 1 else None


@dataclass
class EchoUpstream(ThreadedServer):
    server_name = "echo upstream"

    ssl_context: ssl.SSLContext | None
    port: int = 0
    requests: list[Seen] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _runner: web.AppRunner | None = None

    def _record(self, request: web.Request) -> Seen:
        seen = Seen(
            method=request.method,
            path=request.path_qs,
            host=request.host,
            headers=list(request.headers.items()),
        )
        with self._lock:
            self.requests.append(seen)
        return seen

    def last(self) -> Seen:
        with self._lock:
            return self.requests[-1]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    async def _echo(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        seen = self._record(request)
        auth = seen.all("authorization")
        body = json.dumps({"authorization": auth, "path": seen.path, "host": seen.host}).encode()
        headers = {"content-type": "application/json"}
        if auth:
            headers["x-echo-authorization"] = auth[0]
        big = int(request.query.get("big", "0"))
        if big and auth:
            unit = (b"." * 1013) + auth[0].encode()
            body = (unit * (big // len(unit) + 1))[:big]
            headers["content-type"] = "application/octet-stream"
        if request.query.get("gzip") == "1":
            body = gzip.compress(body)
            headers["content-encoding"] = "gzip"
        return web.Response(body=body, headers=headers)

    async def _ws(self, request: web.Request) -> web.StreamResponse:
        seen = self._record(request)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str(json.dumps({"authorization": seen.all("authorization")}))
        async for msg in ws:
            if msg.type == web.WSMsgType.TEXT:
                await ws.send_str(msg.data)
        return ws

    async def _open(self) -> None:
        app = web.Application()
        app.router.add_get("/ws", self._ws)
        app.router.add_route("*", "/{tail:.*}", self._echo)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.ssl_context)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        self.port = server.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@contextmanager
def echo_upstream(ca: TestCA | None, *names: str) -> Iterator[EchoUpstream]:
    """TLS (leaf for ``names`` from ``ca``) or, with ``ca=None``, plain HTTP."""
    ctx = ca.issue(*names).server_context() if ca is not None else None
    server = EchoUpstream(ctx).start()
    try:
        yield server
    finally:
        server.stop()
