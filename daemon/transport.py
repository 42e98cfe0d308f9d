"""The HTTP layer under the routes: aiohttp's own errors as envelopes, timeouts, a connection cap.

The routes' middleware turns every error a handler raises into the JSON
envelope, but some errors never reach a handler: a request head aiohttp
cannot parse (a bad method, an invalid header or URL, a line over 8 KiB) is
answered by ``RequestHandler.handle_error``, which writes ``text/plain``. So
each listener runs its own ``RequestHandler`` subclass that:

- answers every low-level error with the envelope (``invalid_request`` for a
  malformed request, ``too_large`` for an over-long line, ``internal`` with an
  incident id only for a fault of ours), never echoing the raw bytes to the
  log (a header may hold a token);
- closes a connection whose request head has not fully arrived within the
  header timeout (from its first byte, or from the connection's start), so a
  half-open client cannot hold a slot; idle keep-alive connections close after
  the keep-alive timeout (aiohttp's own timer);
- answers ``503`` with the envelope on a connection beyond the listener's cap
  (after reading its request head, so an ordinary client sees the answer
  instead of a reset), then closes it;
- on a listener with tokens, keeps connections that have not yet presented a
  valid token under their own, smaller cap (see :class:`ConnectionLimits`),
  so idle or unauthenticated clients can never keep a valid token from being
  served: when a new connection needs room, the unauthenticated connection
  idle the longest (no request in flight, no unread byte) is closed, and a
  request carrying a valid token is served even on a connection that arrived
  over the cap.

aiohttp 3.x offers no public hook for any of this; the one private seam used is
``Server.__call__`` (the protocol factory), replaced by giving the runner's
server a subclass. The tests in ``tests/daemon/adversarial`` hold each
behaviour in place across aiohttp upgrades.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server

from .errors import AirlockError, Internal, InvalidRequest, Timeout, TooLarge
from .metrics import DaemonMetrics

log = logging.getLogger("airlockd")

UNAVAILABLE_CODE = "unavailable"


@dataclass(frozen=True)
class ConnectionLimits:
    """Per-listener connection limits (``--header-timeout``, ``--keepalive-timeout``, ...).

    ``max_connections`` bounds every connection of the listener (descriptors
    are finite); ``max_unauthenticated`` bounds those that have not yet sent a
    request with a valid token, which is all an attacker without a token can
    hold. On a listener without tokens (the Unix socket whose mode is the
    access control) every connection counts as authenticated.
    """

    header_timeout_s: float = 10.0
    keepalive_timeout_s: float = 75.0
    max_connections: int = 256
    max_unauthenticated: int = 64


# Connections the kernel queues before the daemon accepts them (capped by
# net.core.somaxconn). aiohttp's 128 let a burst of connections fill the queue while
# the loop was busy, and a non-blocking connect to a full Unix socket queue fails at
# once (EAGAIN): the orchestrator's new connection would be refused by the kernel
# before the caps below could make room for it.
LISTEN_BACKLOG = 1024

# An unauthenticated connection may be closed to make room only after this long without
# a byte or a request: a fresh client (the orchestrator's, whose head may still be on its
# way) is never the one closed. Nothing is lost meanwhile: a request with a valid token is
# served even on a connection that arrived over the cap.
EVICT_AFTER_S = 1.0

# Given a request's Authorization header: does it carry a valid token?
Authenticator = Callable[[str], bool]


@dataclass(frozen=True)
class Listener:
    """What one listener's protocol objects need: its name (a metric label), limits, and
    (on a listener with tokens) how to tell a valid token, with the connections that have
    not shown one yet, oldest activity first."""

    name: str
    limits: ConnectionLimits
    metrics: DaemonMetrics
    authenticate: Authenticator | None = None
    unauthenticated: dict[EnvelopeRequestHandler, None] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(data, ensure_ascii=False).encode(),
        status=status,
        content_type="application/json",
    )


def error_response(exc: AirlockError) -> web.Response:
    return json_response(exc.to_envelope(), exc.status)


def unavailable_response(message: str) -> web.Response:
    """503 with the envelope; the code is outside the contract's table (it names none for 503)."""
    envelope = {"error": {"code": UNAVAILABLE_CODE, "message": message, "details": {}}}
    resp = json_response(envelope, 503)
    resp.headers["Retry-After"] = "1"
    return resp


def internal_error(where: str) -> Internal:
    """An ``internal`` error with an incident id; the traceback goes to the log only."""
    incident = secrets.token_hex(6)
    log.exception("internal error %s on %s", incident, where)
    return Internal(
        f"internal error (incident {incident}); the daemon log has details",
        {"incident": incident},
    )


def _reason(exc: BaseException | None, message: str | None) -> str:
    """A short, printable reason from aiohttp's parser error (first line, no raw bytes)."""
    text = message or (exc.message if isinstance(exc, HttpProcessingError) else "") or ""
    first = str(text).strip().split("\n", 1)[0].strip().rstrip(":")
    return first.encode("ascii", "backslashreplace").decode()[:160] or "unparseable request"


def low_level_error(
    status: int, exc: BaseException | None, message: str | None, where: str
) -> AirlockError:
    """The envelope error for something aiohttp's protocol caught before any route ran."""
    if status == 500:
        return internal_error(where)
    if status == 504:
        return Timeout("the request took too long and was abandoned; retry it or split the work")
    if isinstance(exc, LineTooLong):
        return TooLarge(
            f"a request line or header is too long ({_reason(exc, message)}); "
            "send shorter headers and put data in the JSON body"
        )
    return InvalidRequest(
        f"malformed HTTP request ({_reason(exc, message)}); send a well-formed HTTP/1.1 "
        "request: POST /v1/tools/NAME with a JSON body"
    )


class EnvelopeRequestHandler(RequestHandler):
    """aiohttp's protocol with envelope errors, a header timeout and a connection cap."""

    __slots__ = ("_active_at", "_authenticated", "_busy", "_head_timer", "_inner", "_listener")

    def __init__(self, manager: Server, *, listener: Listener, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._listener = listener
        self._head_timer: asyncio.TimerHandle | None = None
        self._authenticated = listener.authenticate is None
        self._busy = 0  # requests of this connection being handled
        self._active_at = time.monotonic()  # last byte received or request finished
        self._inner = self._request_handler
        self._request_handler = self._serve

    # ------------------------------------------------------------ connection caps

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        listener, limits = self._listener, self._listener.limits
        manager = self._manager
        pending = listener.unauthenticated
        over = False
        if manager is not None and len(manager.connections) >= limits.max_connections:
            over = not self._evict_one()
        if not over and not self._authenticated and len(pending) >= limits.max_unauthenticated:
            over = not self._evict_one()
        if over:
            listener.metrics.connections_rejected[listener.name] += 1
            self._inner = self._over_capacity
        if not self._authenticated:
            pending[self] = None
        super().connection_made(transport)
        self._arm_head_timer()

    async def _serve(self, request: BaseRequest) -> web.StreamResponse:
        """Every request: note a valid token (the connection leaves the unauthenticated
        set for good, and is served even if it arrived over the cap), then handle it."""
        self._busy += 1
        try:
            auth = self._listener.authenticate
            if (
                not self._authenticated
                and auth is not None
                and auth(request.headers.get("Authorization", ""))
            ):
                self._authenticated = True
                self._listener.unauthenticated.pop(self, None)
                self._inner = self._manager.request_handler if self._manager else self._inner
            handler = self._inner
            assert handler is not None
            return await handler(request)
        finally:
            self._busy -= 1
            self._touch()

    def _touch(self) -> None:
        """Mark activity: the connection moves to the young end of the eviction order."""
        self._active_at = time.monotonic()
        pending = self._listener.unauthenticated
        if self in pending:
            del pending[self]
            pending[self] = None

    def _evict_one(self) -> bool:
        """Close the unauthenticated connection idle the longest to make room; False if none
        may go (every one has a request in flight or bytes not yet read)."""
        for other in list(self._listener.unauthenticated):
            if other is not self and other._idle():
                self._listener.metrics.connections_evicted[self._listener.name] += 1
                self._listener.unauthenticated.pop(other, None)
                log.debug(
                    "closed an idle %s connection without a valid token to make room",
                    self._listener.name,
                )
                other.force_close()
                return True
        return False

    def _idle(self) -> bool:
        """Quiet for :data:`EVICT_AFTER_S`, no request in flight or parsed and waiting, and
        nothing unread in the socket: a client that has just connected or written its head is
        about to be served, never the one closed."""
        if self._busy or self._messages or self.transport is None:
            return False
        if time.monotonic() - self._active_at < EVICT_AFTER_S:
            return False
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return True
        probe = socket.socket(fileno=sock.fileno())
        try:
            return not probe.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return True
        except OSError:
            return True  # reset or gone: closing it is right
        finally:
            probe.detach()

    async def _over_capacity(self, request: BaseRequest) -> web.StreamResponse:
        resp = unavailable_response(
            f"airlockd serves at most {self._listener.limits.max_connections} connections on "
            "this listener and all are in use; close idle connections or retry in a moment"
        )
        resp.force_close()
        return resp

    # ------------------------------------------------------------ header timeout

    def _arm_head_timer(self) -> None:
        timeout = self._listener.limits.header_timeout_s
        if self._head_timer is None and timeout > 0:
            self._head_timer = self._loop.call_later(timeout, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        self._listener.metrics.header_timeouts[self._listener.name] += 1
        log.info(
            "closed a %s connection: no complete request head within %.1f s",
            self._listener.name,
            self._listener.limits.header_timeout_s,
        )
        self.force_close()

    def data_received(self, data: bytes) -> None:
        # Idle between requests (start() waits for the next message): these bytes begin a head.
        if data and self._waiter is not None and not self._waiter.done():
            self._arm_head_timer()
        if data:
            self._touch()
        seen = self._request_count
        super().data_received(data)
        if self._request_count != seen:  # a whole head (or a parse error) arrived
            self._disarm_head_timer()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm_head_timer()
        self._listener.unauthenticated.pop(self, None)
        super().connection_lost(exc)

    # ------------------------------------------------------------ envelope errors

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:
            raise ConnectionError("the response has started; the error cannot be sent")
        if status != 500:
            # The class name is enough to debug; the message may quote header bytes (tokens).
            log.info("refused a malformed request: %s", type(exc).__name__ if exc else status)
        error = low_level_error(status, exc, message, "the HTTP protocol layer")
        resp = error_response(error)
        resp.force_close()
        return resp


class EnvelopeServer(Server):
    """aiohttp's ``Server`` whose protocol factory builds :class:`EnvelopeRequestHandler`."""

    listener: Listener

    def __call__(self) -> RequestHandler:
        return EnvelopeRequestHandler(self, loop=self._loop, listener=self.listener, **self._kwargs)


class EnvelopeRunner(web.AppRunner):
    """``AppRunner`` for one listener: its limits, its keep-alive, its protocol class."""

    def __init__(self, app: web.Application, *, listener: Listener, **kwargs: Any) -> None:
        super().__init__(app, keepalive_timeout=listener.limits.keepalive_timeout_s, **kwargs)
        self.listener = listener

    async def _make_server(self) -> Server:
        server = await super()._make_server()
        server.__class__ = EnvelopeServer
        assert isinstance(server, EnvelopeServer)
        server.listener = self.listener
        return server
