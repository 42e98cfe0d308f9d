"""aiohttp routes over :class:`Workspace`: auth, JSON in and out, errors as envelopes.

Nothing here knows what a tool does. A handler parses the body, checks the
token's scope, calls the workspace, and serialises the model; any exception
that is not one of ours becomes ``internal`` with an id to find it in the log,
never a traceback on the wire. Errors aiohttp raises before a route runs are
turned into envelopes by :mod:`airlock.daemon.transport`.

Every listener (the Unix socket, the optional TCP one) shares one
:class:`ServerState`: one token table, re-read once on SIGHUP, and one metrics
registry.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from airlock import __version__ as VERSION

from .auth import Scope, TokenTable
from .errors import (
    AirlockError,
    ErrorCode,
    Forbidden,
    InvalidRequest,
    NotFound,
    TooLarge,
    Unauthorized,
)
from .exec_stream import exec_stream
from .metrics import DaemonMetrics
from .offload import run_cpu
from .openapi import openapi_document
from .protocol import TOOL_SPECS, HealthOutput, TextFile, ToolCatalog
from .request_body import read_json_body
from .tracing import trace_middleware
from .transfer import ROUTES as TRANSFER_ROUTES
from .transfer import RouteHandler
from .transport import error_response, internal_error, json_response
from .watch import ROUTES as WATCH_ROUTES
from .workspace import Workspace

log = logging.getLogger("airlockd")

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_BODY_TIMEOUT_S = 60.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ServerState:
    """State every listener shares: the token table (reloaded on SIGHUP) and the metrics."""

    def __init__(self, token_file: Path | None) -> None:
        self.token_file = token_file
        self.tokens: TokenTable | None = TokenTable.load(token_file) if token_file else None
        self.metrics = DaemonMetrics(
            tools=(*(spec.name for spec in TOOL_SPECS), *(r[2] for r in AGENT_ROUTES)),
            outcomes=(str(code) for code in ErrorCode),
        )
        self.catalog = ToolCatalog(tools=[spec.info() for spec in TOOL_SPECS]).model_dump(
            mode="json"
        )

    def reload_tokens(self) -> None:
        """Re-read the token file; a bad file keeps the old table (raises, the caller logs)."""
        if self.token_file is not None:
            table = TokenTable.load(self.token_file)
            self.tokens = table
            log.info(
                "token file reloaded: %d token(s)%s",
                len(table.entries),
                "" if table.entries else " (every token revoked)",
            )

    def presents_valid_token(self, authorization: str) -> bool:
        """Whether an ``Authorization`` header holds a valid token (the connection caps of
        :mod:`airlock.daemon.transport` count a connection as authenticated from then on)."""
        scheme, _, value = authorization.partition(" ")
        tokens = self.tokens
        return (
            tokens is not None
            and scheme.lower() == "bearer"
            and tokens.scope_of(value.strip()) is not None
        )

    def scope_for(self, request: web.Request) -> Scope:
        if self.tokens is None:
            if request.app[REQUIRE_TOKEN_KEY]:
                raise Unauthorized("this listener requires a token, and none is configured")
            return "write"
        header = request.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise Unauthorized(
                "missing bearer token: send 'Authorization: Bearer <token>' "
                "(ask the orchestrator for one)"
            )
        scope = self.tokens.scope_of(value.strip())
        if scope is None:
            raise Unauthorized("the bearer token is not valid; check the token you were given")
        return scope


WORKSPACE_KEY = web.AppKey("workspace", Workspace)
STATE_KEY = web.AppKey("state", ServerState)
REQUIRE_TOKEN_KEY = web.AppKey("require_token", bool)
BODY_TIMEOUT_KEY = web.AppKey("body_timeout", float)
# Routes that read their body whole, with the largest body each accepts (a route's canonical
# path -> bytes): a larger declared Content-Length is refused before the body is read.
# Routes not named here stream their bodies (file uploads) and bound them themselves.
BODY_LIMITS_KEY = web.AppKey("body_limits", dict[str, int])

# OS errors a caller's input causes (a name over NAME_MAX, a symlink loop, an
# environment over ARG_MAX): the client's mistake, so never ``internal``.
_CLIENT_ERRNOS = {
    errno.ENAMETOOLONG: "a path or name in the request is too long for the file system",
    errno.ELOOP: "a path in the request runs into a symlink loop",
    errno.E2BIG: "the command's arguments and environment are too large",
}


def body_limit(request: web.Request) -> int | None:
    """The largest body ``request``'s route reads whole, or None for a route that streams
    its body (a file upload bounded by the disk, not by memory)."""
    resource = request.match_info.route.resource
    return None if resource is None else request.app[BODY_LIMITS_KEY].get(resource.canonical)


def refuse_declared_oversize(request: web.Request) -> None:
    """413 before reading a byte of a body whose declared size is over the route's limit.

    aiohttp only counts bytes as they arrive, so a client declaring 100 GB held a
    handler (and its connection) until the body timeout. The answer closes the
    connection: the rest of that body is never wanted.
    """
    declared = request.content_length
    limit = body_limit(request) if declared is not None else None
    if declared is not None and limit is not None and declared > limit:
        raise TooLarge(
            f"the request declares a {declared}-byte body, over this route's limit of {limit} "
            "bytes; split the change into smaller calls",
            {"declared": declared, "limit": limit},
        )


async def answer_and_close(request: web.Request, resp: web.Response) -> web.Response:
    """Send ``resp`` now and close the connection, without aiohttp's lingering read of the
    unread body (up to 10 s of a slot held for bytes nobody wants)."""
    resp.force_close()
    await resp.prepare(request)
    await resp.write_eof()
    if request.protocol is not None:
        request.protocol.force_close()  # the transport flushes the answer, then closes
    return resp


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        refuse_declared_oversize(request)
    except TooLarge as exc:
        return await answer_and_close(request, error_response(exc))
    try:
        return await handler(request)
    except AirlockError as exc:
        return error_response(exc)
    except web.HTTPRequestEntityTooLarge as exc:
        return error_response(
            TooLarge(
                f"the request body is over the limit ({exc.text}); split the change into "
                "smaller calls"
            )
        )
    except web.HTTPException as exc:
        return error_response(_http_error(request, exc))
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return error_response(client_mistake(exc) or internal_error(request.path))


def client_mistake(exc: BaseException) -> AirlockError | None:
    """The envelope error for an exception the caller's input caused, or None (a fault of ours)."""
    if isinstance(exc, OSError) and exc.errno in _CLIENT_ERRNOS:
        return InvalidRequest(f"{_CLIENT_ERRNOS[exc.errno]}; shorten or fix it and call again")
    if isinstance(exc, UnicodeEncodeError):
        return InvalidRequest("the request holds text that is not valid Unicode; send UTF-8 text")
    if isinstance(exc, PermissionError):
        # Workspace operations run with the exec user's rights (daemon/rights.py): a
        # refusal is the sandbox user's own permissions, not a fault of the daemon.
        return Forbidden(
            "the sandbox's user may not do that here (permission denied); fix the permissions "
            "with exec (ls -l, chmod) or use another path",
            {"reason": "permission_denied"},
        )
    if isinstance(exc, ValueError) and "null byte" in str(exc):
        # os/subprocess refuse a NUL in a path, argument or pattern ("embedded null byte").
        return InvalidRequest(
            "the request holds a NUL byte (\\u0000) in a path, pattern, glob or argument, "
            "which no file name or command line can carry; remove it and call again"
        )
    return None


def _http_error(request: web.Request, exc: web.HTTPException) -> AirlockError:
    """aiohttp's router errors (404, 405, ...) as envelopes that say what exists."""
    if exc.status == 404:
        return NotFound(
            f"there is no route {request.method} {_printable(request.path)}; the routes are "
            "GET /v1/health, GET /v1/tools, POST /v1/tools/NAME, POST /v1/exec/stream, "
            "POST /v1/watch, GET|PUT /v1/files, GET|PUT /v1/archive, GET /v1/openapi.json, "
            "GET /metrics"
        )
    if exc.status == 405:
        allowed = exc.headers.get("Allow", "")
        return _MethodNotAllowed(
            f"{request.method} is not allowed on {_printable(request.path)}; use {allowed}"
        )
    return InvalidRequest(f"{exc.reason or 'bad request'}; fix the request and call again")


class _MethodNotAllowed(InvalidRequest):
    """``invalid_request`` answered with HTTP's own 405, so generic clients see the method error."""

    @property
    def status(self) -> int:
        return 405


def _printable(text: str) -> str:
    return text[:200].encode("ascii", "backslashreplace").decode()


async def health(request: web.Request) -> web.Response:
    ws = request.app[WORKSPACE_KEY]
    body = HealthOutput(
        status="ok",
        version=VERSION,
        workspace=str(ws.ctx.roots.workspace),
        engines=ws.ctx.engines,
    )
    return json_response(body.model_dump(mode="json"))


async def list_tools(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    state.scope_for(request)
    return json_response(state.catalog)


async def openapi(request: web.Request) -> web.Response:
    request.app[STATE_KEY].scope_for(request)
    return json_response(openapi_document(VERSION))


async def metrics(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    state.scope_for(request)
    return web.Response(text=state.metrics.render(), content_type="text/plain")


async def _read_body(request: web.Request) -> bytes:
    """The whole body within the body timeout (a client trickling bytes cannot hold a handler)."""
    if request.content.is_eof():  # the whole body already arrived: nothing to wait for
        return await request.read()
    limit = request.app[BODY_TIMEOUT_KEY]
    try:
        async with asyncio.timeout(limit):
            return await request.read()
    except TimeoutError:
        raise InvalidRequest(
            f"the request body did not arrive within {limit:g} s; send the whole body at once"
        ) from None


async def call_tool(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    ws = request.app[WORKSPACE_KEY]
    scope = state.scope_for(request)
    name = request.match_info["name"]
    if request.content_type.startswith("multipart/"):
        raise InvalidRequest(
            f"the request body is {request.content_type}; send the tool's input as a JSON "
            "object (Content-Type: application/json)"
        )
    raw = await _read_body(request) if request.can_read_body else b""
    body: Any = await read_json_body(raw, run_cpu)
    started = time.monotonic()
    state.metrics.in_flight += 1
    outcome = "ok"
    try:
        result = await ws.call(name, body, scope=scope)
    except AirlockError as exc:
        outcome = str(exc.code)
        raise
    except Exception as exc:
        mistake = client_mistake(exc)
        if mistake is None:
            outcome = "internal"
            raise
        outcome = str(mistake.code)
        raise mistake from None
    finally:
        state.metrics.in_flight -= 1
        state.metrics.observe(name, outcome, time.monotonic() - started)
    # The serializer's bytes go straight to the wire (model_dump_json would decode them to str).
    # A page of file_read is bounded and hot; anything else may be megabytes (diffs, exec
    # output, images) and is serialised on the shared CPU pool so the loop stays free.
    serialize = result.__pydantic_serializer__.to_json
    if isinstance(result, TextFile):
        data = serialize(result)
    else:
        data = await run_cpu(lambda: serialize(result))
    return web.Response(body=data, content_type="application/json")


async def exec_stream_route(request: web.Request) -> web.StreamResponse:
    """NDJSON events of one command as they happen (see ``exec_stream``)."""
    scope = request.app[STATE_KEY].scope_for(request)
    return await exec_stream(request, request.app[WORKSPACE_KEY], scope)


# Watch and transfer: streamed routes with their own handlers (daemon/watch, daemon/transfer).
AGENT_ROUTES = (*WATCH_ROUTES, *TRANSFER_ROUTES)


def agent_route(label: str, handler: RouteHandler) -> Handler:
    """The token's scope in, the metrics out; the handler does the rest."""

    async def route(request: web.Request) -> web.StreamResponse:
        state = request.app[STATE_KEY]
        scope = state.scope_for(request)
        started, outcome = time.monotonic(), "ok"
        try:
            return await handler(request, request.app[WORKSPACE_KEY], scope)
        except AirlockError as exc:
            outcome = str(exc.code)
            raise
        except (ConnectionError, asyncio.CancelledError):
            outcome = "cancelled"
            raise
        except Exception:
            outcome = "internal"
            raise
        finally:
            state.metrics.observe(label, outcome, time.monotonic() - started)

    return route


def build_app(
    workspace: Workspace,
    *,
    state: ServerState | None = None,
    token_file: Path | None = None,
    require_token: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
) -> web.Application:
    """One listener's app; pass the same ``state`` to every listener of a daemon."""
    app = web.Application(
        middlewares=[trace_middleware, error_middleware], client_max_size=max_body_bytes
    )
    app[WORKSPACE_KEY] = workspace
    app[STATE_KEY] = state if state is not None else ServerState(token_file)
    app[REQUIRE_TOKEN_KEY] = require_token
    app[BODY_TIMEOUT_KEY] = body_timeout_s
    app[BODY_LIMITS_KEY] = {
        "/v1/tools/{name}": max_body_bytes,
        "/v1/exec/stream": max_body_bytes,
    }
    app.router.add_get("/v1/health", health)
    app.router.add_get("/v1/tools", list_tools)
    app.router.add_post("/v1/tools/{name}", call_tool)
    app.router.add_post("/v1/exec/stream", exec_stream_route)
    app.router.add_get("/v1/openapi.json", openapi)
    app.router.add_get("/metrics", metrics)
    for method, path, label, handler in AGENT_ROUTES:
        app.router.add_route(method, path, agent_route(label, handler))
    return app
