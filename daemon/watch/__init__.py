"""``POST /v1/watch``: file changes as NDJSON events while the connection stays open.

The body is :class:`~airlock.daemon.protocol.WatchInput`; bad input, a path
outside the roots or a path that is not a directory are ordinary JSON error
envelopes before the stream starts. The response headers are sent once every
watch is in place, so a client that has them sees every later change. Lines
are :class:`~airlock.daemon.protocol.WatchEvent` objects. Closing the
connection (or the daemon stopping) removes every watch: the inotify
descriptor is closed. Read scope is enough.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from ..auth import Scope
from ..protocol import WatchInput
from ..request_body import read_stream_input
from ..transfer import RouteHandler
from ..workspace import Workspace
from .watcher import MAX_PENDING, Watcher

NDJSON = "application/x-ndjson"


async def _input(request: web.Request) -> WatchInput:
    return await read_stream_input(request, WatchInput, "(paths, recursive, ...)")


async def watch_route(request: web.Request, ws: Workspace, scope: Scope) -> web.StreamResponse:
    del scope  # read scope is enough
    req = await _input(request)
    ctx = ws.ctx
    resolved = [ctx.resolve(p, intent="read") for p in req.paths]
    ready: list[dict[str, Any]] = []
    news = asyncio.Event()
    watcher: Watcher | None = None

    def on_lines(lines: list[dict[str, Any]]) -> None:
        if len(ready) + len(lines) > MAX_PENDING and watcher is not None:
            ready.clear()
            ready.append({"type": "overflow"})
        else:
            ready.extend(lines)
        news.set()

    watcher = await asyncio.to_thread(
        Watcher,
        ctx,
        resolved,
        recursive=req.recursive,
        include=req.include,
        exclude=req.exclude,
        ignore_files=req.ignore_files,
        on_lines=on_lines,
    )
    try:
        watcher.start(asyncio.get_running_loop())
        response = web.StreamResponse(headers={"Content-Type": NDJSON, "Cache-Control": "no-store"})
        await response.prepare(request)
        while True:
            await news.wait()
            news.clear()
            lines, ready[:] = list(ready), []
            data = b"".join(
                json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
                for line in lines
            )
            await response.write(data)
    finally:
        watcher.close()


ROUTES: tuple[tuple[str, str, str, RouteHandler], ...] = (
    ("POST", "/v1/watch", "watch", watch_route),
)
