"""Serving an :class:`AirlockMCP` over stdio or streamable HTTP (the SDK's transports)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from airlock.client.mcp.server import AirlockMCP

HTTP_PATH = "/mcp"


async def serve_stdio(app: AirlockMCP) -> None:
    """Serve on this process's stdin/stdout until the host closes them."""
    from airlock.client.mcp.stdio import stdio_streams

    async with stdio_streams() as (read, write):
        await app.server.run(read, write, app.server.create_initialization_options())


LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _rebinding_guard(host: str, port: int) -> dict[str, Any]:
    """On loopback, refuse any Host/Origin but the loopback names (DNS rebinding from a browser).

    Elsewhere the names clients use are unknown here, so the check stays off; put such a
    listener behind something that authenticates.
    """
    if host not in LOOPBACK:
        return {}
    try:
        from mcp.server.transport_security import TransportSecuritySettings
    except ImportError:  # mcp < 1.10 has no such check
        return {}
    names = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    return {
        "security_settings": TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=names,
            allowed_origins=[f"http://{name}" for name in names],
        )
    }


async def serve_http(app: AirlockMCP, host: str, port: int) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until cancelled."""
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send

    manager = StreamableHTTPSessionManager(app=app.server, **_rebinding_guard(host, port))

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
