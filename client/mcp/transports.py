"""Serving an :class:`AirlockMCP` over stdio or streamable HTTP (the SDK's transports)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from airlock.client.mcp.server import AirlockMCP

HTTP_PATH = "/mcp"


async def serve_stdio(app: AirlockMCP) -> None:
    """Serve on this process's stdin/stdout until the host closes them."""
    from airlock.client.mcp.stdio import stdio_streams

    async with stdio_streams() as (read, write):
        await app.server.run(read, write, app.server.create_initialization_options())


async def serve_http(app: AirlockMCP, host: str, port: int) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until cancelled."""
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send

    manager = StreamableHTTPSessionManager(app=app.server)

    class Endpoint:  # an ASGI object, so Route serves /mcp itself (no redirect to /mcp/)
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            await manager.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    web = Starlette(
        routes=[Route(HTTP_PATH, endpoint=Endpoint(), methods=["GET", "POST", "DELETE"])],
        lifespan=lifespan,
    )
    config = uvicorn.Config(web, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
