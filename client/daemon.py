"""``DaemonClient``: the orchestrator's async client for airlockd.

One typed method per tool, plus ``call(name, args)`` for generic dispatch (an
LLM tool call is a name and a dict). Errors come back as the same
:class:`~airlock.daemon.errors.AirlockError` subclasses the daemon raised,
named after their codes, so ``except PathEscape`` works on both sides.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, TypeVar

import aiohttp
from pydantic import BaseModel, TypeAdapter

from airlock.daemon.errors import (
    AirlockError,
    AmbiguousMatch,
    BinaryFile,
    Conflict,
    Forbidden,
    GeneratedFile,
    HunkNotFound,
    Internal,
    InvalidRequest,
    IsDirectory,
    NotFound,
    PatchParseError,
    PathEscape,
    StaleWrite,
    Timeout,
    TooLarge,
    Unauthorized,
    UnknownTool,
    error_from_envelope,
)
from airlock.daemon.protocol import (
    ApplyPatchInput,
    ApplyPatchOutput,
    DiagnosticsInput,
    DiagnosticsOutput,
    ExecErrorEvent,
    ExecEvent,
    ExecInput,
    ExecOutput,
    FileDiffPreviewInput,
    FileDiffPreviewOutput,
    FileListInput,
    FileListOutput,
    FileMultiPatchInput,
    FileMultiPatchOutput,
    FileMultiReadInput,
    FileMultiReadOutput,
    FilePatchInput,
    FilePatchOutput,
    FileReadInput,
    FileReadOutput,
    FileSearchInput,
    FileSearchOutput,
    FileWriteInput,
    FileWriteOutput,
    HealthOutput,
    ImageFile,
    ProcessKillInput,
    ProcessKillOutput,
    ProcessListInput,
    ProcessListOutput,
    ProcessReadInput,
    ProcessReadOutput,
    ProcessStartInput,
    ProcessStartOutput,
    ProcessWriteInput,
    ProcessWriteOutput,
    TextFile,
    ToolInfo,
    ToolInput,
)

__all__ = [
    "AirlockError",
    "AmbiguousMatch",
    "BinaryFile",
    "Conflict",
    "DaemonClient",
    "Forbidden",
    "GeneratedFile",
    "HunkNotFound",
    "Internal",
    "InvalidRequest",
    "IsDirectory",
    "NotFound",
    "PatchParseError",
    "PathEscape",
    "StaleWrite",
    "Timeout",
    "TooLarge",
    "Unauthorized",
    "UnknownTool",
]

In = TypeVar("In", bound=ToolInput)
Out = TypeVar("Out")

_READ_ADAPTER: TypeAdapter[TextFile | ImageFile] = TypeAdapter(FileReadOutput)
_EVENT_ADAPTER: TypeAdapter[ExecEvent] = TypeAdapter(ExecEvent)


class DaemonClient:
    """Async client over a Unix socket (``socket=``) or TCP (``url=``)."""

    def __init__(
        self,
        socket: str | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        if (socket is None) == (url is None):
            raise ValueError("give exactly one of socket= or url=")
        self._socket = socket
        self._base = (url or "http://airlockd").rstrip("/")
        self._token = token
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> DaemonClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = (
                aiohttp.UnixConnector(path=self._socket) if self._socket is not None else None
            )
            headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
            self._session = aiohttp.ClientSession(
                connector=connector, headers=headers, timeout=self._timeout
            )
        return self._session

    async def _request(self, method: str, route: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        async with self._http().request(
            method,
            f"{self._base}{route}",
            data=data,
            headers={"Content-Type": "application/json"} if data is not None else None,
        ) as resp:
            raw = await resp.read()
            if resp.status >= 400:
                raise _error_from_response(resp.status, raw)
            if resp.content_type == "application/json":
                return json.loads(raw)
            return raw.decode("utf-8", errors="replace")

    # ------------------------------------------------------------ service routes

    async def health(self) -> HealthOutput:
        return HealthOutput.model_validate(await self._request("GET", "/v1/health"))

    async def tools(self) -> list[ToolInfo]:
        data = await self._request("GET", "/v1/tools")
        return [ToolInfo.model_validate(t) for t in data["tools"]]

    async def openapi(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._request("GET", "/v1/openapi.json")
        return result

    async def metrics(self) -> str:
        result: str = await self._request("GET", "/metrics")
        return result

    async def call(self, name: str, args: dict[str, Any] | BaseModel) -> dict[str, Any]:
        """Call any tool by name with a dict (or model) of its input; returns the JSON output."""
        body = (
            args.model_dump(mode="json", exclude_unset=True)
            if isinstance(args, BaseModel)
            else args
        )
        result: dict[str, Any] = await self._request("POST", f"/v1/tools/{name}", body)
        return result

    async def _typed(
        self, name: str, model: type[In], req: In | None, kwargs: dict[str, Any], out: type[Out]
    ) -> Out:
        request = req if req is not None else model.model_validate(kwargs)
        data = await self.call(name, request)
        return TypeAdapter(out).validate_python(data)

    # ------------------------------------------------------------ one method per tool

    async def file_read(self, req: FileReadInput | None = None, **kw: Any) -> TextFile | ImageFile:
        request = req if req is not None else FileReadInput.model_validate(kw)
        return _READ_ADAPTER.validate_python(await self.call("file_read", request))

    async def file_multi_read(
        self, req: FileMultiReadInput | None = None, **kw: Any
    ) -> FileMultiReadOutput:
        return await self._typed(
            "file_multi_read", FileMultiReadInput, req, kw, FileMultiReadOutput
        )

    async def file_list(self, req: FileListInput | None = None, **kw: Any) -> FileListOutput:
        return await self._typed("file_list", FileListInput, req, kw, FileListOutput)

    async def file_search(self, req: FileSearchInput | None = None, **kw: Any) -> FileSearchOutput:
        return await self._typed("file_search", FileSearchInput, req, kw, FileSearchOutput)

    async def file_diff_preview(
        self, req: FileDiffPreviewInput | None = None, **kw: Any
    ) -> FileDiffPreviewOutput:
        return await self._typed(
            "file_diff_preview", FileDiffPreviewInput, req, kw, FileDiffPreviewOutput
        )

    async def diagnostics(
        self, req: DiagnosticsInput | None = None, **kw: Any
    ) -> DiagnosticsOutput:
        return await self._typed("diagnostics", DiagnosticsInput, req, kw, DiagnosticsOutput)

    async def file_write(self, req: FileWriteInput | None = None, **kw: Any) -> FileWriteOutput:
        return await self._typed("file_write", FileWriteInput, req, kw, FileWriteOutput)

    async def file_patch(self, req: FilePatchInput | None = None, **kw: Any) -> FilePatchOutput:
        return await self._typed("file_patch", FilePatchInput, req, kw, FilePatchOutput)

    async def file_multi_patch(
        self, req: FileMultiPatchInput | None = None, **kw: Any
    ) -> FileMultiPatchOutput:
        return await self._typed(
            "file_multi_patch", FileMultiPatchInput, req, kw, FileMultiPatchOutput
        )

    async def apply_patch(self, req: ApplyPatchInput | None = None, **kw: Any) -> ApplyPatchOutput:
        return await self._typed("apply_patch", ApplyPatchInput, req, kw, ApplyPatchOutput)

    async def exec(self, req: ExecInput | None = None, **kw: Any) -> ExecOutput:
        return await self._typed("exec", ExecInput, req, kw, ExecOutput)

    # ------------------------------------------------------------ streaming exec and processes

    async def exec_stream(
        self, req: ExecInput | None = None, **kw: Any
    ) -> AsyncIterator[ExecEvent]:
        """Run a command and yield its events as they happen (``POST /v1/exec/stream``).

        ``started`` (pid), then ``stdout``/``stderr`` chunks (text and byte offset),
        then ``exit``. Errors before the start raise like any tool call; an
        ``error`` event after it raises too. Leaving the loop early (``break``,
        cancellation) closes the connection, and the daemon kills the command.
        """
        request = req if req is not None else ExecInput.model_validate(kw)
        body = request.model_dump(mode="json", exclude_unset=True)
        async with self._http().post(
            f"{self._base}/v1/exec/stream",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        ) as resp:
            if resp.status >= 400:
                raise _error_from_response(resp.status, await resp.read())
            pending = b""
            async for chunk in resp.content.iter_any():
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        event = _EVENT_ADAPTER.validate_json(line)
                        if isinstance(event, ExecErrorEvent):
                            err = event.error
                            raise error_from_envelope(err.code, err.message, err.details)
                        yield event

    async def process_start(
        self, req: ProcessStartInput | None = None, **kw: Any
    ) -> ProcessStartOutput:
        """Start a background process (a dev server, a watcher); returns its id and pid."""
        return await self._typed("process_start", ProcessStartInput, req, kw, ProcessStartOutput)

    async def process_read(
        self, req: ProcessReadInput | None = None, **kw: Any
    ) -> ProcessReadOutput:
        """Read a background process's output from ``offset``; ``wait_ms`` long-polls."""
        return await self._typed("process_read", ProcessReadInput, req, kw, ProcessReadOutput)

    async def process_write(
        self, req: ProcessWriteInput | None = None, **kw: Any
    ) -> ProcessWriteOutput:
        """Write to a background process's stdin (``eof=True`` closes it)."""
        return await self._typed("process_write", ProcessWriteInput, req, kw, ProcessWriteOutput)

    async def process_kill(
        self, req: ProcessKillInput | None = None, **kw: Any
    ) -> ProcessKillOutput:
        """Signal a background process and its tree (TERM, INT or KILL)."""
        return await self._typed("process_kill", ProcessKillInput, req, kw, ProcessKillOutput)

    async def process_list(
        self, req: ProcessListInput | None = None, **kw: Any
    ) -> ProcessListOutput:
        """The background processes, running and recently exited."""
        return await self._typed("process_list", ProcessListInput, req, kw, ProcessListOutput)


def _error_from_response(status: int, raw: bytes) -> AirlockError:
    try:
        body = json.loads(raw)
        err = body["error"]
        return error_from_envelope(err["code"], err["message"], err.get("details"))
    except (ValueError, KeyError, TypeError):
        return Internal(f"airlockd answered HTTP {status} without an error envelope")
