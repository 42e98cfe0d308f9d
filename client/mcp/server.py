"""The MCP server: airlockd's tools (model schemas) for any MCP host.

Built on the official ``mcp`` SDK's low-level server, so every tool is the
daemon's own: the catalogue is read from ``GET /v1/tools`` at start, each tool
offered with its ``model_input_schema`` (never ``granted_paths``) and with
``readOnlyHint``/``destructiveHint``/``idempotentHint`` from the catalogue.

- A daemon refusal is a tool result with ``isError: true`` whose text is the
  envelope's message (written for the model to act on); it is not a protocol
  error, so the model sees it and can retry.
- ``file_read`` of an image answers MCP image content.
- ``exec`` reports progress while it runs (when the caller sent a progress
  token): from ``DaemonClient.exec_stream()`` when the client has it (each
  output chunk is a notification), else a tick every ``progress_interval_s``.
- Extra tools (``github_shell``) plug in as :class:`ExtraTool` entries.
- Schemas pass strict-mode conversion (maps are ``{name, value}`` lists, see
  :mod:`.schemas`); unknown JSON-RPC methods get -32601 (:mod:`.methods`);
  ``serverInfo.version`` is airlock's.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server

from airlock import __version__
from airlock.daemon.protocol import ExecOutput

from ..daemon import DaemonClient
from ..errors import ClientError, ToolError
from ..tools import collect, mcp_tools, model_arguments, normalize_schema
from .methods import AirlockServer
from .schemas import served_schema

log = logging.getLogger(__name__)

Content = types.TextContent | types.ImageContent
Progress = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass(frozen=True)
class ExtraTool:
    """A tool served beside the daemon's: its catalogue entry and how to run it."""

    entry: Mapping[str, Any]
    run: Callable[[dict[str, Any]], Awaitable[Any]]


class ToolCallFailed(Exception):
    """Raised inside a handler: the SDK turns it into ``isError: true`` with this message."""


def _text(data: Any) -> list[Content]:
    return [types.TextContent(type="text", text=json.dumps(data, ensure_ascii=False, indent=1))]


def render(name: str, result: Mapping[str, Any]) -> list[Content]:
    """MCP content for a tool's JSON output: images as image content, the rest as JSON."""
    if name == "file_read" and result.get("kind") == "image":
        return [
            types.ImageContent(
                type="image", data=str(result["data_base64"]), mimeType=str(result["mime"])
            ),
            types.TextContent(
                type="text",
                text=f"{result.get('path')}: {result.get('mime')}, {result.get('bytes')} bytes",
            ),
        ]
    if name == "file_multi_read":
        content: list[Content] = []
        for item in result.get("files", []):
            if isinstance(item, Mapping) and item.get("kind") == "image":
                content.extend(render("file_read", item))
            else:
                content.extend(_text(item))
        return content
    return _text(result)


class AirlockMCP:
    """One MCP server over one daemon client; ``server`` is the SDK's low-level server."""

    def __init__(
        self,
        client: DaemonClient,
        catalog: Sequence[Mapping[str, Any]],
        *,
        extra: Iterable[ExtraTool] = (),
        include: Iterable[str] | None = None,
        progress_interval_s: float = 1.0,
        name: str = "airlock",
    ) -> None:
        self.client = client
        self.extra = {str(t.entry["name"]): t for t in extra}
        entries = [*catalog, *(t.entry for t in self.extra.values())]
        self.entries = collect(entries, github_shell=False, include=include)
        # Normalized once: the way back from a model's arguments runs on every call.
        self.schemas = {t["name"]: normalize_schema(t["input_schema"]) for t in self.entries}
        # Maps served as {name, value} lists (strict-convertible); model_arguments turns
        # them back with self.schemas, the tool's own input schema.
        self.tools = [
            tool.model_copy(update={"inputSchema": served_schema(tool.inputSchema)})
            for tool in mcp_tools(self.entries, github_shell=False)
        ]
        self.progress_interval_s = progress_interval_s
        # serverInfo.version is airlock's (the SDK would report its own otherwise).
        self.server: Server[Any, Any] = AirlockServer(name, version=__version__)
        self._register()

    def _register(self) -> None:
        @self.server.list_tools()  # type: ignore[no-untyped-call,untyped-decorator]
        async def _list() -> list[types.Tool]:
            return self.tools

        # The SDK's own input validation (mcp >= 1.10) re-checks the schema itself with
        # jsonschema on every call (~20-50 ms); the daemon validates every input anyway
        # (unknown fields refused) and model_arguments refuses orchestrator-only fields.
        options: dict[str, Any] = {}
        if "validate_input" in inspect.signature(self.server.call_tool).parameters:
            options["validate_input"] = False

        @self.server.call_tool(**options)  # type: ignore[untyped-decorator]
        async def _call(name: str, arguments: dict[str, Any] | None) -> list[Content]:
            return await self.call(name, arguments or {}, self._progress())

    def _progress(self) -> Progress | None:
        """A sender of progress notifications for the current request, if it asked for them."""
        try:
            ctx = self.server.request_context
        except LookupError:
            return None
        token = ctx.meta.progressToken if ctx.meta is not None else None
        if token is None:
            return None
        send = ctx.session.send_progress_notification
        params = _progress_params(type(ctx.session))
        extra: dict[str, Any] = {}
        if "related_request_id" in params:  # streamable HTTP: route it to this request's stream
            extra["related_request_id"] = str(ctx.request_id)

        async def progress(done: float, total: float | None, message: str | None) -> None:
            kwargs = dict(extra)
            if "message" in params and message is not None:
                kwargs["message"] = message
            await send(token, done, total, **kwargs)

        return progress

    async def call(
        self, name: str, arguments: Mapping[str, Any], progress: Progress | None = None
    ) -> list[Content]:
        """Run one tool call; a refusal raises :class:`ToolCallFailed` (an ``isError`` result)."""
        if name not in self.schemas:
            raise ToolCallFailed(
                f"there is no tool named {name!r} here; use one of: {', '.join(self.schemas)}"
            )
        try:
            args = model_arguments(name, arguments, schema=self.schemas[name], normalized=True)
            if name in self.extra:
                result = await self.extra[name].run(args)
                data = result.model_dump() if hasattr(result, "model_dump") else result
                if isinstance(data, Mapping) and data.get("type") in ("denied", "error"):
                    raise ToolCallFailed(str(data.get("reason", "the call was refused")))
                return _text(data)
            if name == "exec" and progress is not None:
                return _text(await self._exec_with_progress(args, progress))
            return render(name, await self.client.call(name, args))
        except ToolError as exc:
            raise ToolCallFailed(exc.message) from None
        except ClientError as exc:
            raise ToolCallFailed(f"{type(exc).__name__}: {exc}") from None

    async def _exec_with_progress(self, args: dict[str, Any], progress: Progress) -> Any:
        stream = getattr(self.client, "exec_stream", None)
        if stream is not None:
            return await self._exec_streamed(stream, args, progress)
        return await self._exec_ticking(args, progress)

    async def _exec_ticking(self, args: dict[str, Any], progress: Progress) -> Any:
        """Until the daemon streams: the call runs while a tick reports elapsed seconds."""
        total = float(args.get("timeout_s") or 60)
        started = time.monotonic()
        task = asyncio.ensure_future(self.client.call("exec", args))
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.progress_interval_s)
                if done:
                    return task.result()
                elapsed = time.monotonic() - started
                await progress(
                    round(elapsed, 1), total, f"{args['argv'][0]}: running {elapsed:.0f}s"
                )
        finally:
            if not task.done():
                task.cancel()

    async def _exec_streamed(
        self, stream: Callable[..., Any], args: dict[str, Any], progress: Progress
    ) -> Any:
        """With ``DaemonClient.exec_stream()``: each output event is a progress notification,
        and the result has exec's shape (output kept as ``keep``/``max_output_bytes`` say).

        A command that prints nothing for ``progress_interval_s`` still gets a heartbeat
        notification, so a host can tell a silent build from a hung call.
        """
        limit = int(args.get("max_output_bytes") or 100_000)
        keep_head = args.get("keep") == "head"
        out = {"stdout": bytearray(), "stderr": bytearray()}
        cut = {"stdout": False, "stderr": False}
        started = time.monotonic()
        exit_event: Mapping[str, Any] = {}
        count = 0
        async for event in self._with_heartbeats(stream(**args)):
            if event is None:
                count += 1
                elapsed = time.monotonic() - started
                await progress(count, None, f"{args['argv'][0]}: running {elapsed:.0f}s")
                continue
            data = event if isinstance(event, Mapping) else event.model_dump()
            kind = data.get("type")
            if kind in out:
                chunk = str(data.get("data", "")).encode()
                buf = out[kind]
                buf.extend(chunk)
                if len(buf) > limit:
                    cut[kind] = True
                    if keep_head:
                        del buf[limit:]
                    else:
                        del buf[: len(buf) - limit]
                count += 1
                await progress(count, None, f"{kind}: {data.get('data', '')}"[:4096])
            elif kind == "exit":
                exit_event = data
        return ExecOutput(
            exit_code=exit_event.get("exit_code"),
            signal=exit_event.get("signal"),
            timed_out=bool(exit_event.get("timed_out", False)),
            duration_ms=int(exit_event.get("duration_ms", (time.monotonic() - started) * 1000)),
            stdout=out["stdout"].decode(errors="replace"),
            stderr=out["stderr"].decode(errors="replace"),
            stdout_truncated=cut["stdout"],
            stderr_truncated=cut["stderr"],
        ).model_dump()

    async def _with_heartbeats(self, events: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """``events``, with ``None`` inserted after every ``progress_interval_s`` of silence."""
        iterator = aiter(events)
        pending: asyncio.Future[Any] | None = None
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(anext(iterator))
                done, _ = await asyncio.wait({pending}, timeout=self.progress_interval_s)
                if not done:
                    yield None
                    continue
                try:
                    event = pending.result()
                except StopAsyncIteration:
                    return
                pending = None
                yield event
        finally:
            if pending is not None and not pending.done():
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await pending
            closer = getattr(iterator, "aclose", None)
            if closer is not None:
                await closer()


_PROGRESS_PARAMS: dict[Any, frozenset[str]] = {}


def _progress_params(session_type: Any) -> frozenset[str]:
    """Keyword arguments this SDK version's send_progress_notification takes (cached)."""
    params = _PROGRESS_PARAMS.get(session_type)
    if params is None:
        method = session_type.send_progress_notification
        params = _PROGRESS_PARAMS[session_type] = frozenset(inspect.signature(method).parameters)
    return params


async def load(
    client: DaemonClient,
    *,
    include: Iterable[str] | None = None,
    extra: Iterable[ExtraTool] = (),
    progress_interval_s: float = 1.0,
) -> AirlockMCP:
    """An :class:`AirlockMCP` over the daemon's current catalogue."""
    catalog = [t.model_dump() for t in await client.tools()]
    return AirlockMCP(
        client, catalog, include=include, extra=extra, progress_interval_s=progress_interval_s
    )
