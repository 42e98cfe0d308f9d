"""Serving an :class:`AirlockMCP` over stdio or streamable HTTP (the SDK's transports).

Over HTTP every request must carry ``Authorization: Bearer <token>`` when a
token is configured (``--http-token-file``): anything else is answered 401
with ``WWW-Authenticate: Bearer`` before the MCP session sees it, the token
compared in constant time. :func:`check_bind` refuses a non-loopback address
without a token: anyone who can reach it would get exec with the daemon's token.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
from collections.abc import AsyncIterator
from typing import Any

from .server import AirlockMCP

HTTP_PATH = "/mcp"


async def serve_stdio(app: AirlockMCP) -> None:
    """Serve on this process's stdin/stdout until the host closes them."""
    from .stdio import stdio_streams

    async with stdio_streams() as (read, write):
        await app.server.run(read, write, app.server.create_initialization_options())


LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and any address in 127.0.0.0/8 or ``::1``."""
    if host in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse (ValueError, one line) a non-loopback listener without a bearer token."""
    if token is None and not is_loopback(host):
        raise ValueError(
            f"--http {host}: a non-loopback address needs --http-token-file (clients then "
            "send 'Authorization: Bearer <token>'); without one anyone who reaches the "
            "port could run commands in the sandbox"
        )


UNAUTHORIZED_BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32001,
            "message": "missing or wrong bearer token: send 'Authorization: Bearer <token>' "
            "with the token in airlock mcp's --http-token-file",
        },
    }
).encode()


def bearer_ok(scope: Any, token: bytes) -> bool:
    """The request's ``Authorization: Bearer`` value equals ``token`` (constant time)."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, given = value.partition(b" ")
            return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token)
    return False


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


def _has_header(scope: Any, name: bytes) -> bool:
    return any(key == name for key, _ in scope.get("headers", ()))


MAX_SNIFF_BYTES = 64 * 1024 * 1024  # as stdio's line limit: a large patch fits


async def _buffered(receive: Any) -> tuple[bytes, Any]:
    """The whole request body, and a ``receive`` that hands the same body on again."""
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return b"", receive  # disconnected: let the SDK see it
        chunk = message.get("body", b"")
        size += len(chunk)
        chunks.append(chunk)
        more = message.get("more_body", False)
        if size > MAX_SNIFF_BYTES:
            break  # too big to sniff: hand on what came and let the rest stream
    body = b"".join(chunks)
    replayed = False

    async def replay() -> Any:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return (b"" if more else body), replay


def unknown_method_answer(body: bytes) -> bytes | None:
    """The -32601 answer when ``body`` is one JSON-RPC request for a method the SDK lacks."""
    from .methods import KNOWN_REQUESTS

    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or "id" not in message:
        return None
    method = message.get("method")
    if not isinstance(method, str) or method in KNOWN_REQUESTS:
        return None
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": message["id"],
            "error": {"code": -32601, "message": f"Method not found: {method[:200]}"},
        }
    ).encode()


async def _send_json(send: Any, status: int, body: bytes, extra: list[Any] | None = None) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def serve_http(app: AirlockMCP, host: str, port: int, *, token: str | None = None) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until cancelled.

    With ``token`` every request must carry it as a bearer token (else 401).
    """
    check_bind(host, token)
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send

    manager = StreamableHTTPSessionManager(app=app.server, **_rebinding_guard(host, port))

    expected = token.encode() if token is not None else None

    class Endpoint:  # an ASGI object, so Route serves /mcp itself (no redirect to /mcp/)
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if expected is not None and not bearer_ok(scope, expected):
                challenge = [(b"www-authenticate", b'Bearer realm="airlock mcp"')]
                await _send_json(send, 401, UNAUTHORIZED_BODY, challenge)
                return
            if scope["method"] == "POST" and not _has_header(scope, b"mcp-session-id"):
                # Before a session exists the SDK answers any request but initialize with
                # 400 "Missing session ID"; an unknown method (mcp 2.x clients open with
                # server/discover) gets -32601 here, as it does inside a session.
                body, receive = await _buffered(receive)
                answer = unknown_method_answer(body)
                if answer is not None:
                    await _send_json(send, 200, answer)
                    return
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
