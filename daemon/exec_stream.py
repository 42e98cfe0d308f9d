"""``POST /v1/exec/stream``: ``exec``'s input, its output as NDJSON events while it happens.

Events, one JSON object a line::

    {"type": "started", "pid": 123}
    {"type": "stdout" | "stderr", "data": "...", "offset": 0}
    {"type": "exit", "exit_code": 0, "timed_out": false, "duration_ms": 12, ...}

``data`` is UTF-8 (invalid bytes replaced) and never splits a character
across events; one event carries at most 64 KiB of the command's output, and
``offset`` is the byte offset of its first byte in that stream (the lines are
built by :mod:`.exec_events`). The ``exit`` event also carries ``exec``'s
``signal``, ``stdout_truncated``, ``stderr_truncated`` and ``spill_path``
(null: a streamed command is not spilled, its client holds every byte). Everything before ``started`` (bad
input, a missing program, the token's scope) is the ordinary JSON error
envelope with its HTTP status; a failure after it (there should be none) is a
last ``{"type": "error", "error": {...}}`` event. A client that goes away
kills the command's whole tree (the write fails or the handler is cancelled).

The response is written as the pipes are read, with backpressure: a client
that reads slowly slows the command down (its pipe fills), as a terminal does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from typing import Any

from aiohttp import web

from .auth import Scope
from .errors import AirlockError, Forbidden
from .exec_events import OutputEncoder
from .protocol import ExecInput
from .request_body import read_stream_input
from .tools.exec import run_exec
from .workspace import Workspace

log = logging.getLogger("airlockd")

NDJSON = "application/x-ndjson"
_QUEUED_BYTES = 4 * 1024 * 1024


def _line(event: dict[str, Any]) -> bytes:
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


async def parse_exec_input(request: web.Request, scope: Scope) -> ExecInput:
    """The same checks ``exec`` gets through ``Workspace.call``: scope, JSON, the model."""
    if scope == "read":
        raise Forbidden(
            "exec changes the sandbox and this token has read scope only; use a read-only "
            "tool or ask the orchestrator for a write token",
            {"tool": "exec"},
        )
    return await read_stream_input(request, ExecInput, "of exec's input")


async def exec_stream(
    request: web.Request, workspace: Workspace, scope: Scope
) -> web.StreamResponse:
    req = await parse_exec_input(request, scope)
    response = web.StreamResponse(headers={"Content-Type": NDJSON, "Cache-Control": "no-store"})
    write_lock = asyncio.Lock()
    encoders = {"stdout": OutputEncoder("stdout"), "stderr": OutputEncoder("stderr")}

    async def send_lines(lines: list[bytes]) -> None:
        # One write for all the lines of a read: one send(2), one drain check.
        async with write_lock:
            await response.write(lines[0] if len(lines) == 1 else b"".join(lines))

    async def send(event: dict[str, Any]) -> None:
        await send_lines([_line(event)])

    async def on_start(pid: int) -> None:
        await response.prepare(request)
        if request.transport is not None:
            # Let a few reads' worth of events queue before backpressure: the daemon keeps
            # reading the pipe while a client waiting for the CPU catches up (bounded per stream).
            request.transport.set_write_buffer_limits(high=_QUEUED_BYTES)
        await send({"type": "started", "pid": pid})

    async def on_output(stream: str, data: bytes) -> None:
        lines = encoders[stream].feed(data)
        if lines:
            await send_lines(lines)

    try:
        result = await run_exec(workspace.ctx, req, on_start=on_start, on_output=on_output)
    except AirlockError as exc:
        if not response.prepared:
            raise
        await _send_error(send, exc.to_envelope())
        return response
    except (ConnectionError, asyncio.CancelledError):
        raise
    except Exception:
        if not response.prepared:
            raise
        incident = secrets.token_hex(6)
        log.exception("internal error %s in exec stream", incident)
        envelope = {
            "error": {
                "code": "internal",
                "message": f"internal error (incident {incident}); the daemon log has details",
                "details": {"incident": incident},
            }
        }
        await _send_error(send, envelope)
        return response
    try:
        for encoder in encoders.values():
            tail = encoder.finish()
            if tail:
                await send_lines(tail)
        await send({"type": "exit", **result.model_dump(exclude={"stdout", "stderr"})})
        await response.write_eof()
    except ConnectionError:
        pass  # the client left after the command ended: nothing to kill, nobody to tell
    return response


async def _send_error(send: Any, envelope: dict[str, Any]) -> None:
    with contextlib.suppress(ConnectionError):
        await send({"type": "error", **envelope})
