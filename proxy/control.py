"""The control API (aiohttp): sessions, leases, CA, health, metrics.

Served on a Unix socket (mode 0600) by default; TCP requires a bearer token,
compared in constant time. Errors are ``{"error": {"code", "message"}}`` and
are built from field locations and messages only, never from request values,
so a malformed request cannot echo a token back. No response carries a token.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from airlock import __version__

from .context import ProxyContext
from .credentials import CredentialUnavailable
from .metrics import CONTENT_TYPE_LATEST
from .openapi import openapi_document
from .protocol import (
    ERROR_STATUS,
    MAX_EVENT_WAIT_S,
    EventList,
    Health,
    LeaseInfo,
    LeaseList,
    LeasePut,
    LeaseRuleInfo,
    SessionCreate,
    SessionInfo,
    error_json,
    is_valid_id,
)
from .store.base import (
    LeaseRecord,
    PlaceholderInUse,
    SessionRecord,
    StoreUnavailable,
    hash_secret,
)
from .tracing import request_trace_id, trace_middleware

log = logging.getLogger("airlock.proxy.control")

M = TypeVar("M", bound=BaseModel)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

VERSION = __version__  # the distribution's, from its metadata


class ApiError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = ERROR_STATUS.get(code, 500)


def _error(code: str, message: str) -> web.Response:
    return web.Response(
        body=error_json(code, message),
        status=ERROR_STATUS.get(code, 500),
        content_type="application/json",
    )


def _json(model: BaseModel, status: int = 200) -> web.Response:
    return web.Response(
        text=model.model_dump_json(), status=status, content_type="application/json"
    )


def _ts(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_input=False, include_url=False, include_context=False):
        loc = ".".join(str(x) for x in err.get("loc", ())) or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)[:1000]


async def _parse(request: web.Request, model: type[M]) -> M:
    try:
        raw = await request.read()
        data: Any = json.loads(raw or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise ApiError("invalid_request", "body is not valid JSON") from None
    except RecursionError:
        raise ApiError("invalid_request", _TOO_DEEP) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError("invalid_request", _describe(exc)) from None
    except RecursionError:
        raise ApiError("invalid_request", _TOO_DEEP) from None


_TOO_DEEP = "body nests too deeply; send flat JSON as the schema describes"


@web.middleware
async def envelope(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The last word on errors: whatever a handler raises becomes the JSON envelope.

    Outermost middleware, so nothing reaches aiohttp's text/plain 500 page or its
    traceback in the log. A client's mistake that escaped the handlers (nesting
    deep enough to exhaust the stack) is ``invalid_request``; anything else is
    ``internal``, logged as one line naming the route and the exception type
    (never its message, which could quote the request).
    """
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = "not_found" if exc.status == 404 else "invalid_request"
        resp = _error(code, exc.reason or "error")
        resp.set_status(exc.status)
        return resp
    except RecursionError:
        return _error("invalid_request", _TOO_DEEP)
    except Exception as exc:
        log.error("control %s %s failed: %s", request.method, request.path, type(exc).__name__)
        return _error("internal", "the proxy failed to handle this request; retry or report it")


def _id(request: web.Request, name: str) -> str:
    value = request.match_info[name]
    if not is_valid_id(value):
        raise ApiError("invalid_request", f"{name} must match [A-Za-z0-9][A-Za-z0-9_.-]{{0,127}}")
    return value


def _lease_info(lease: LeaseRecord) -> LeaseInfo:
    rules = [LeaseRuleInfo(host=r.host, header=r.header, allow=r.allow) for r in lease.rules]
    return LeaseInfo(
        lease_id=lease.lease_id, hosts=lease.hosts, expires_at=_ts(lease.expires_at), rules=rules
    )


def _query_number(request: web.Request, name: str, default: float, top: float) -> float:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ApiError("invalid_request", f"{name} must be a number") from None
    if not 0 <= value <= top or value != value:
        raise ApiError("invalid_request", f"{name} must be between 0 and {top:g}")
    return value


class ControlAPI:
    def __init__(self, ctx: ProxyContext, ca_pem: bytes) -> None:
        self.ctx = ctx
        self.ca_pem = ca_pem
        self._token = ctx.config.control_token

    def set_token(self, token: str | None) -> None:
        """Replace the bearer token (SIGHUP re-reads ``--control-token-file``)."""
        self._token = token

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[trace_middleware, envelope, self._middleware], client_max_size=1 << 20
        )
        r = app.router
        r.add_get("/v1/health", self.health)
        r.add_get("/v1/openapi.json", self.openapi)
        r.add_get("/v1/ca.pem", self.ca)
        r.add_get("/metrics", self.metrics)
        r.add_post("/v1/sessions", self.create_session)
        r.add_get("/v1/sessions/{sid}", self.get_session)
        r.add_delete("/v1/sessions/{sid}", self.delete_session)
        r.add_get("/v1/sessions/{sid}/leases", self.list_leases)
        r.add_put("/v1/sessions/{sid}/leases/{lid}", self.put_lease)
        r.add_delete("/v1/sessions/{sid}/leases/{lid}", self.delete_lease)
        r.add_get("/v1/sessions/{sid}/events", self.session_events)
        r.add_get("/v1/events", self.all_events)
        return app

    def _authorized(self, request: web.Request) -> bool:
        # Health carries no secret and must be probeable by an orchestrator's
        # plain HTTP probe (Kubernetes cannot attach a Secret to httpGet), as in airlockd.
        if self._token is None or request.path == "/v1/health":
            return True
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            value.strip().encode(), self._token.encode()
        )

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        route = request.match_info.route.resource
        route_name = route.canonical if route is not None else "unmatched"
        status = 500
        try:
            if not self._authorized(request):
                resp: web.StreamResponse = _error("unauthorized", "missing or bad bearer token")
            else:
                try:
                    resp = await handler(request)
                except ApiError as exc:
                    resp = _error(exc.code, exc.message)
                except StoreUnavailable:
                    resp = _error("store_unavailable", "session store unavailable")
                except web.HTTPException as exc:
                    code = "not_found" if exc.status == 404 else "invalid_request"
                    resp = _error(code, exc.reason or "error")
                    resp.set_status(exc.status)
            status = resp.status
            return resp
        finally:
            self.ctx.metrics.control_latency.labels(
                method=request.method, route=route_name, status=str(status)
            ).observe(time.perf_counter() - started)

    async def health(self, request: web.Request) -> web.Response:
        try:
            await self.ctx.store.ping()
        except StoreUnavailable:
            body = Health(status="degraded", store=self.ctx.store.kind, version=VERSION)
            return _json(body, status=503)
        return _json(Health(status="ok", store=self.ctx.store.kind, version=VERSION))

    async def openapi(self, request: web.Request) -> web.Response:
        return web.json_response(openapi_document(VERSION))

    async def ca(self, request: web.Request) -> web.Response:
        return web.Response(body=self.ca_pem, content_type="application/x-pem-file")

    async def metrics(self, request: web.Request) -> web.Response:
        try:
            sessions, leases = await self.ctx.store.counts()
        except StoreUnavailable:
            sessions, leases = -1, -1
        self.ctx.metrics.sessions.set(sessions)
        self.ctx.metrics.leases.set(leases)
        resp = web.Response(body=self.ctx.metrics.render())
        resp.headers["content-type"] = CONTENT_TYPE_LATEST
        return resp

    async def create_session(self, request: web.Request) -> web.Response:
        body = await _parse(request, SessionCreate)
        sid = body.session_id or f"s-{secrets.token_hex(8)}"
        secret = secrets.token_urlsafe(24)
        record = SessionRecord(
            session_id=sid,
            secret_hash=hash_secret(secret),
            allow=tuple(body.allow),
            expires_at=self.ctx.clock() + body.ttl_s,
        )
        if not await self.ctx.store.create_session(record):
            raise ApiError("session_exists", f"session {sid} already exists")
        self.ctx.expiry.watch(sid, None, record.expires_at)
        self.ctx.audit.write(
            "session_created", session=sid, allow=list(record.allow), ttl_s=body.ttl_s
        )
        info = SessionInfo(
            session_id=sid,
            proxy_url=f"http://{sid}:{secret}@{self.ctx.config.advertised}",
            expires_at=_ts(record.expires_at),
        )
        return _json(info, status=201)

    async def get_session(self, request: web.Request) -> web.Response:
        sid = _id(request, "sid")
        record = await self.ctx.store.get_session(sid)
        if record is None:
            raise ApiError("session_not_found", f"no session {sid}")
        return web.json_response(
            {
                "session_id": sid,
                "allow": list(record.allow),
                "expires_at": _ts(record.expires_at).isoformat(),
            }
        )

    async def delete_session(self, request: web.Request) -> web.Response:
        sid = _id(request, "sid")
        existed, leases = await self.ctx.store.delete_session(sid)
        self.ctx.expiry.forget_session(sid)
        # Every tunnel of the session closes now, intercepted or passthrough
        # (other replicas: airlock.proxy.reaper, within a second).
        closed = self.ctx.connections.close_session(sid, "session_deleted")
        for lid in leases:
            self.ctx.audit.write("lease_deleted", session=sid, lease=lid, cause="session_deleted")
        if existed:
            self.ctx.audit.write("session_deleted", session=sid, connections_closed=closed)
        return web.Response(status=204)

    async def list_leases(self, request: web.Request) -> web.Response:
        sid = _id(request, "sid")
        if await self.ctx.store.get_session(sid) is None:
            raise ApiError("session_not_found", f"no session {sid}")
        leases = await self.ctx.store.list_leases(sid)
        return _json(LeaseList(leases=[_lease_info(lease) for lease in leases]))

    async def put_lease(self, request: web.Request) -> web.Response:
        sid = _id(request, "sid")
        lid = _id(request, "lid")
        body = await _parse(request, LeasePut)
        session = await self.ctx.store.get_session(sid)
        if session is None:
            raise ApiError("session_not_found", f"no session {sid}")
        for rule in body.rules:
            if rule.replace.provider is None:
                continue
            # Minted before anything is stored: a lease whose credential cannot
            # be had never becomes live (the token stays in this replica's memory).
            try:
                await self.ctx.credentials.token_for(rule.replace)
            except CredentialUnavailable as exc:
                if exc.reason == "not_configured":
                    raise ApiError("invalid_request", exc.message) from None
                raise ApiError(
                    "credential_unavailable", f"{rule.host}: {exc.reason}: {exc.message}"
                ) from None
        expires_at = min(self.ctx.clock() + body.ttl_s, session.expires_at)
        record = LeaseRecord(
            session_id=sid,
            lease_id=lid,
            rules=tuple(body.rules),
            expires_at=expires_at,
            trace_id=request_trace_id(request),
        )
        try:
            replaced = await self.ctx.store.put_lease(record)
        except PlaceholderInUse:
            raise ApiError(
                "placeholder_in_use", "a placeholder of this lease belongs to another live lease"
            ) from None
        self.ctx.expiry.watch(sid, lid, expires_at)
        self.ctx.audit.write(
            "lease_replaced" if replaced else "lease_created",
            session=sid,
            lease=lid,
            hosts=record.hosts,
            ttl_s=body.ttl_s,
            trace_id=record.trace_id,
        )
        return _json(_lease_info(record))

    async def _events(self, request: web.Request, session: str | None) -> web.Response:
        after = int(_query_number(request, "after", 0, 2**62))
        wait_s = _query_number(request, "wait_s", 0, MAX_EVENT_WAIT_S)
        events, nxt = await self.ctx.events.read(after, session, wait_s)
        return _json(EventList(events=events, next=nxt))

    async def session_events(self, request: web.Request) -> web.Response:
        """Long poll of one session's events (``after``, ``wait_s`` up to 60)."""
        sid = _id(request, "sid")
        return await self._events(request, sid)

    async def all_events(self, request: web.Request) -> web.Response:
        """Long poll of every session's events."""
        return await self._events(request, None)

    async def delete_lease(self, request: web.Request) -> web.Response:
        sid = _id(request, "sid")
        lid = _id(request, "lid")
        existed = await self.ctx.store.delete_lease(sid, lid)
        self.ctx.expiry.forget(sid, lid)
        if existed:
            self.ctx.audit.write("lease_deleted", session=sid, lease=lid)
        return web.Response(status=204)
