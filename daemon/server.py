"""aiohttp routes over :class:`Workspace`: auth, JSON in and out, errors as envelopes.

Nothing here knows what a tool does. A handler parses the body, checks the
token's scope, calls the workspace, and serialises the model; any exception
that is not one of ours becomes ``internal`` with an id to find it in the log,
never a traceback on the wire.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from airlock import __version__ as VERSION
from airlock.daemon.auth import Scope, TokenTable
from airlock.daemon.errors import AirlockError, InvalidRequest, Unauthorized
from airlock.daemon.metrics import DaemonMetrics
from airlock.daemon.openapi import openapi_document
from airlock.daemon.protocol import TOOL_SPECS, HealthOutput, ToolCatalog
from airlock.daemon.workspace import Workspace

log = logging.getLogger("airlockd")

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ServerState:
    """Mutable per-app state: the token table (reloaded on SIGHUP) and metrics."""

    def __init__(self, token_file: Path | None, require_token: bool) -> None:
        self.token_file = token_file
        self.require_token = require_token
        self.tokens: TokenTable | None = TokenTable.load(token_file) if token_file else None
        self.metrics = DaemonMetrics()
        self.catalog = ToolCatalog(tools=[spec.info() for spec in TOOL_SPECS]).model_dump(
            mode="json"
        )

    def reload_tokens(self) -> None:
        if self.token_file is not None:
            self.tokens = TokenTable.load(self.token_file)
            log.info("token file reloaded")

    def scope_for(self, request: web.Request) -> Scope:
        if self.tokens is None:
            if self.require_token:
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


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(data, ensure_ascii=False).encode(),
        status=status,
        content_type="application/json",
    )


def _error_response(exc: AirlockError) -> web.Response:
    return _json(exc.to_envelope(), exc.status)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except AirlockError as exc:
        return _error_response(exc)
    except web.HTTPRequestEntityTooLarge as exc:
        return _json(
            {
                "error": {
                    "code": "too_large",
                    "message": f"the request body is over the limit ({exc.text}); "
                    "split the change into smaller calls",
                    "details": {},
                }
            },
            413,
        )
    except web.HTTPException as exc:
        code = {404: "unknown_tool", 405: "invalid_request"}.get(exc.status, "invalid_request")
        return _json(
            {"error": {"code": code, "message": exc.reason or "bad request", "details": {}}},
            exc.status,
        )
    except asyncio.CancelledError:
        raise
    except Exception:
        incident = secrets.token_hex(6)
        log.exception("internal error %s on %s", incident, request.path)
        return _json(
            {
                "error": {
                    "code": "internal",
                    "message": f"internal error (incident {incident}); the daemon log has details",
                    "details": {"incident": incident},
                }
            },
            500,
        )


async def health(request: web.Request) -> web.Response:
    ws = request.app[WORKSPACE_KEY]
    body = HealthOutput(
        status="ok",
        version=VERSION,
        workspace=str(ws.ctx.roots.workspace),
        engines=ws.ctx.engines,
    )
    return _json(body.model_dump(mode="json"))


async def list_tools(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    state.scope_for(request)
    return _json(state.catalog)


async def openapi(request: web.Request) -> web.Response:
    request.app[STATE_KEY].scope_for(request)
    return _json(openapi_document(VERSION))


async def metrics(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    state.scope_for(request)
    return web.Response(text=state.metrics.render(), content_type="text/plain")


async def call_tool(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    ws = request.app[WORKSPACE_KEY]
    scope = state.scope_for(request)
    name = request.match_info["name"]
    try:
        body = await request.json() if request.can_read_body else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidRequest(
            f"the request body is not valid JSON ({exc}); send a JSON object"
        ) from None
    started = time.monotonic()
    state.metrics.in_flight += 1
    outcome = "ok"
    try:
        result = await ws.call(name, body, scope=scope)
    except AirlockError as exc:
        outcome = str(exc.code)
        raise
    except Exception:
        outcome = "internal"
        raise
    finally:
        state.metrics.in_flight -= 1
        state.metrics.observe(name, outcome, time.monotonic() - started)
    # The serializer's bytes go straight to the wire (model_dump_json would decode them to str).
    body = result.__pydantic_serializer__.to_json(result)
    return web.Response(body=body, content_type="application/json")


def build_app(
    workspace: Workspace,
    *,
    token_file: Path | None = None,
    require_token: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> web.Application:
    app = web.Application(middlewares=[error_middleware], client_max_size=max_body_bytes)
    app[WORKSPACE_KEY] = workspace
    app[STATE_KEY] = ServerState(token_file, require_token)
    app.router.add_get("/v1/health", health)
    app.router.add_get("/v1/tools", list_tools)
    app.router.add_post("/v1/tools/{name}", call_tool)
    app.router.add_get("/v1/openapi.json", openapi)
    app.router.add_get("/metrics", metrics)
    return app
