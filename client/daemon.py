"""``DaemonClient``: the orchestrator's async client for airlockd.

One typed method per tool (generated from ``TOOL_SPECS`` into
:mod:`airlock.client._methods`: keyword arguments with the model's types and
docstrings, or the input model positionally), plus ``call(name, args)`` for
generic dispatch and ``call_model(name, args)`` for arguments that came from a
model (orchestrator-only fields refused, strict-mode shapes converted back).

Every error is an :class:`~airlock.client.errors.ClientError`: tool refusals
are the daemon's classes by code (``except PathEscape`` works on both sides),
an unreachable daemon is :class:`DaemonUnavailable`, no answer in time is
:class:`CallTimeout`. Timeouts by default: 5 s to connect, and for a call the
tool's own timeout (``exec``'s ``timeout_s``) or its catalogue default, plus a
margin.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from pydantic import BaseModel, TypeAdapter

from airlock.daemon.protocol import (
    TOOLS_BY_NAME,
    ExecErrorEvent,
    ExecEvent,
    ExecInput,
    HealthOutput,
    ToolInfo,
    ToolSpec,
)

from . import tracing
from ._closing import AsyncClosing
from ._methods import AsyncToolMethods
from .errors import (
    AmbiguousMatch,
    BinaryFile,
    CallTimeout,
    ClientError,
    Conflict,
    DaemonUnavailable,
    Forbidden,
    GeneratedFile,
    HunkNotFound,
    Internal,
    InvalidRequest,
    IsDirectory,
    NotFound,
    PatchParseError,
    PathEscape,
    ReadOnly,
    StaleWrite,
    Timeout,
    TooLarge,
    ToolError,
    Unauthorized,
    UnknownTool,
    tool_error,
)
from .ndjson import LineSplitter
from .transfer import TransferMethods

# ``AirlockError`` is the client's ToolError: a subclass of the daemon's AirlockError
# (so existing ``except AirlockError`` keeps catching) and of ClientError.
AirlockError = ToolError

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_TIMEOUT_MARGIN_S",
    "AirlockError",
    "AmbiguousMatch",
    "BinaryFile",
    "CallTimeout",
    "ClientError",
    "Conflict",
    "DaemonClient",
    "DaemonUnavailable",
    "Forbidden",
    "GeneratedFile",
    "HunkNotFound",
    "Internal",
    "InvalidRequest",
    "IsDirectory",
    "NotFound",
    "PatchParseError",
    "PathEscape",
    "ReadOnly",
    "StaleWrite",
    "Timeout",
    "TooLarge",
    "ToolError",
    "Unauthorized",
    "UnknownTool",
]

DEFAULT_CONNECT_TIMEOUT_S = 5.0
DEFAULT_CALL_TIMEOUT_S = 30.0  # service routes (health, tools, metrics)
DEFAULT_TIMEOUT_MARGIN_S = 30.0

_ADAPTERS: dict[str, TypeAdapter[Any]] = {}
_EVENT_ADAPTER: TypeAdapter[ExecEvent] = TypeAdapter(ExecEvent)


def _adapter(spec: ToolSpec) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(spec.name)
    if adapter is None:
        adapter = _ADAPTERS[spec.name] = TypeAdapter(spec.output_type)
    return adapter


def call_timeout(
    spec: ToolSpec | None, body: dict[str, Any], margin_s: float, override_s: float | None
) -> float:
    """Seconds to wait for a call: ``override_s``, else the tool's own timeout plus margin."""
    if override_s is not None:
        return override_s
    if spec is None:
        return DEFAULT_CALL_TIMEOUT_S + margin_s
    own: Any = spec.default_timeout_s
    if spec.timeout_field is not None:
        value = body.get(spec.timeout_field)
        if isinstance(value, int | float) and not isinstance(value, bool):
            own = value
        else:
            field = spec.input_model.model_fields.get(spec.timeout_field)
            if field is not None and isinstance(field.default, int | float):
                own = field.default
    return float(own) + margin_s


class DaemonClient(AsyncClosing, AsyncToolMethods, TransferMethods):
    """Async client over a Unix socket (``socket=``) or TCP (``url=``).

    File transfer (``upload``, ``download``, ``upload_tree``, ``download_tree``) and
    ``watch`` come from :class:`~airlock.client.transfer.TransferMethods`.

    ``timeout_s`` fixes one total timeout for every call (as before);
    without it each call waits for the tool's own timeout plus ``timeout_margin_s``.

    Every request carries a W3C ``traceparent`` (see :func:`airlock.client.tracing.outgoing`):
    ``traceparent=`` fixes one for this client; by default it comes from the current
    OpenTelemetry span, else each call starts a trace of its own.
    """

    def __init__(
        self,
        socket: str | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        timeout_s: float | None = None,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        timeout_margin_s: float = DEFAULT_TIMEOUT_MARGIN_S,
        service_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        traceparent: str | None = None,
    ) -> None:
        if (socket is None) == (url is None):
            raise ValueError("give exactly one of socket= or url=")
        if traceparent is not None and tracing.parse(traceparent) is None:
            raise ValueError(f"traceparent={traceparent!r} is not a valid W3C traceparent")
        self._traceparent = traceparent
        self._socket = socket
        self._base = (url or "http://airlockd").rstrip("/")
        self._token = token
        self._override = timeout_s
        self._connect = connect_timeout_s
        self._margin = timeout_margin_s
        self._service = service_timeout_s
        self._session: aiohttp.ClientSession | None = None

    @property
    def endpoint(self) -> str:
        """Where this client talks to: ``unix:PATH`` or the base URL."""
        return f"unix:{self._socket}" if self._socket is not None else self._base

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = (
                aiohttp.UnixConnector(path=self._socket) if self._socket is not None else None
            )
            headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=None, connect=self._connect),
            )
        return self._session

    async def _request(
        self, method: str, route: str, body: Any = None, *, timeout_s: float | None = None
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        total = timeout_s if timeout_s is not None else (self._override or self._service)
        timeout = aiohttp.ClientTimeout(total=total, connect=self._connect)
        headers = {tracing.HEADER: tracing.outgoing(self._traceparent)}
        if data is not None:
            headers["Content-Type"] = "application/json"
        try:
            async with self._http().request(
                method,
                f"{self._base}{route}",
                data=data,
                headers=headers,
                timeout=timeout,
            ) as resp:
                raw = await resp.read()
                if resp.status >= 400:
                    raise _error_from_response(resp.status, raw)
                if resp.content_type == "application/json":
                    return json.loads(raw)
                return raw.decode("utf-8", errors="replace")
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise CallTimeout(
                f"airlockd at {self.endpoint} did not answer {method} {route} within {total:g}s; "
                "it may be stopped or overloaded (raise the timeout for long calls)"
            ) from exc
        except aiohttp.ClientError as exc:
            raise self._unreachable(exc) from exc

    def _unreachable(self, exc: aiohttp.ClientError) -> DaemonUnavailable:
        """The error for a daemon that cannot be reached, naming where and what to check."""
        return DaemonUnavailable(
            f"airlockd at {self.endpoint} is unreachable ({type(exc).__name__}: {exc}); "
            "check that it runs and that the socket/URL is right"
        )

    # ------------------------------------------------------------ service routes

    async def health(self) -> HealthOutput:
        """The daemon's liveness, version, workspace and engines."""
        return HealthOutput.model_validate(await self._request("GET", "/v1/health"))

    async def tools(self) -> list[ToolInfo]:
        """The tool catalogue (``GET /v1/tools``), for building model definitions."""
        data = await self._request("GET", "/v1/tools")
        return [ToolInfo.model_validate(t) for t in data["tools"]]

    async def openapi(self) -> dict[str, Any]:
        """The OpenAPI 3.1 document of the daemon."""
        result: dict[str, Any] = await self._request("GET", "/v1/openapi.json")
        return result

    async def metrics(self) -> str:
        """Prometheus metrics text."""
        result: str = await self._request("GET", "/metrics")
        return result

    # ------------------------------------------------------------ generic entries

    async def call(
        self, name: str, args: dict[str, Any] | BaseModel, *, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Call any tool by name with a dict (or model) of its input; returns the JSON output."""
        body = (
            args.model_dump(mode="json", exclude_unset=True)
            if isinstance(args, BaseModel)
            else args
        )
        limit = call_timeout(
            TOOLS_BY_NAME.get(name), body, self._margin, timeout_s or self._override
        )
        result: dict[str, Any] = await self._request(
            "POST", f"/v1/tools/{name}", body, timeout_s=limit
        )
        return result

    async def call_model(
        self, name: str, arguments: dict[str, Any] | str, *, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Call a tool with the arguments a model sent (a dict or its JSON text).

        Orchestrator-only fields (``granted_paths``) are refused, nulls a strict-mode
        model sends for omitted options are dropped and ``[{name, value}]`` maps are
        turned back into objects (see :func:`airlock.client.tools.model_arguments`).
        """
        from .tools import model_arguments

        return await self.call(name, model_arguments(name, arguments), timeout_s=timeout_s)

    # ------------------------------------------------------------ streaming exec

    async def exec_stream(
        self, req: ExecInput | None = None, **kw: Any
    ) -> AsyncIterator[ExecEvent]:
        """Run a command and yield its events as they happen (``POST /v1/exec/stream``).

        ``started`` (pid), then ``stdout``/``stderr`` chunks (text and byte offset),
        then ``exit``. Errors before the start raise like any tool call; an
        ``error`` event after it raises too. Leaving the loop early (``break``,
        cancellation) closes the connection, and the daemon kills the command. The
        client waits for the command's own ``timeout_s`` plus the client's margin.
        """
        spec = TOOLS_BY_NAME["exec"]
        request = req if req is not None else _validate(spec, kw)
        body = request.model_dump(mode="json", exclude_unset=True)
        limit = call_timeout(spec, body, self._margin, self._override)
        timeout = aiohttp.ClientTimeout(total=limit, connect=self._connect)
        try:
            async with self._http().post(
                f"{self._base}/v1/exec/stream",
                data=json.dumps(body).encode(),
                headers={
                    "Content-Type": "application/json",
                    tracing.HEADER: tracing.outgoing(self._traceparent),
                },
                timeout=timeout,
            ) as resp:
                if resp.status >= 400:
                    raise _error_from_response(resp.status, await resp.read())
                splitter = LineSplitter()
                async for chunk in resp.content.iter_any():
                    for line in splitter.feed(chunk):
                        event = _EVENT_ADAPTER.validate_json(line)
                        if isinstance(event, ExecErrorEvent):
                            err = event.error
                            raise tool_error(err.code, err.message, err.details)
                        yield event
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise CallTimeout(
                f"airlockd at {self.endpoint} did not finish the exec stream within {limit:g}s"
            ) from exc
        except aiohttp.ClientError as exc:
            raise self._unreachable(exc) from exc

    async def _tool(self, name: str, req: Any, kw: dict[str, Any]) -> Any:
        spec = TOOLS_BY_NAME[name]
        request = req if req is not None else _validate(spec, kw)
        return _adapter(spec).validate_python(await self.call(name, request))


def _validate(spec: ToolSpec, kw: dict[str, Any]) -> BaseModel:
    from pydantic import ValidationError

    try:
        return spec.input_model.model_validate(kw)
    except ValidationError as exc:
        parts = [
            f"{'.'.join(str(x) for x in e['loc']) or 'input'}: {e['msg']}"
            for e in exc.errors(include_url=False)[:10]
        ]
        raise InvalidRequest(
            f"invalid input for {spec.name}: " + "; ".join(parts), {"tool": spec.name}
        ) from None


def _error_from_response(status: int, raw: bytes) -> ToolError:
    try:
        body = json.loads(raw)
        err = body["error"]
        return tool_error(err["code"], err["message"], err.get("details"))
    except (ValueError, KeyError, TypeError):
        return Internal(f"airlockd answered HTTP {status} without an error envelope")
