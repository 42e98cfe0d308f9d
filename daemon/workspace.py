"""The in-process API: one method per tool, the same models as the socket.

The server is a thin layer over this class; tests and embedders call it
directly. ``call`` is the generic entry both use: it validates the input
against the tool's model and enforces the token scope.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from . import apply_patch as apply_patch_engine
from .auth import Scope
from .context import DaemonConfig, ToolContext
from .errors import Forbidden, InvalidRequest, UnknownTool
from .offload import ThreadHop
from .protocol import (
    TOOL_SPECS,
    TOOLS_BY_NAME,
    ApplyPatchInput,
    ApplyPatchOutput,
    DiagnosticsInput,
    DiagnosticsOutput,
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
    FileSearchInput,
    FileSearchOutput,
    FileWriteInput,
    FileWriteOutput,
    ImageFile,
    ProcessKillInput,
    ProcessKillOutput,
    ProcessListInput,
    ProcessListOutput,
    ProcessReadInput,
    ProcessReadOutput,
    ProcessResizeInput,
    ProcessResizeOutput,
    ProcessStartInput,
    ProcessStartOutput,
    ProcessWriteInput,
    ProcessWriteOutput,
    TextFile,
)
from .search.engine import resolve_engine
from .tools import exec as exec_mod
from .tools import listing, patch, read, search, write


def validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:10]:
        where = ".".join(str(x) for x in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "invalid input: " + "; ".join(parts) + ". Fix these fields and call again."


class Workspace:
    def __init__(self, config: DaemonConfig) -> None:
        self.config = config
        self.ctx = ToolContext.create(config)
        # file_read's resolve+read hop: cheaper than asyncio.to_thread (see offload.py).
        self.io = ThreadHop()
        # Derived from TOOL_SPECS: a tool is its spec plus a method of the same name here
        # (tests/daemon/test_tool_specs.py checks the method's input and output types).
        self._handlers: dict[str, Callable[[Any], Awaitable[Any]]] = {
            spec.name: getattr(self, spec.name) for spec in TOOL_SPECS
        }

    async def aclose(self) -> None:
        """Stop helpers the tools started (the diagnostics worker, I/O threads); idempotent."""
        self.io.close()
        await self.ctx.diag.aclose()
        await self.ctx.procs.aclose()

    async def startup(self) -> None:
        """Recover interrupted patches and decide engines, before serving."""
        await apply_patch_engine.recover(self.ctx)
        await resolve_engine(self.ctx)
        self.ctx.engines["diagnostics"] = await asyncio.to_thread(self.ctx.diag.describe)

    # ------------------------------------------------------------ generic entry

    async def call(self, name: str, args: dict[str, Any], *, scope: Scope = "write") -> BaseModel:
        spec = TOOLS_BY_NAME.get(name)
        if spec is None:
            raise UnknownTool(
                f"there is no tool named {name!r}; GET /v1/tools lists them",
                {"tools": sorted(TOOLS_BY_NAME)},
            )
        if not isinstance(args, dict):
            raise InvalidRequest("the request body must be a JSON object of the tool's input")
        if scope == "read" and not spec.read_only:
            raise Forbidden(
                f"{name} changes the sandbox and this token has read scope only; use a "
                "read-only tool or ask the orchestrator for a write token",
                {"tool": name},
            )
        try:
            request = spec.input_model.model_validate(args)
        except ValidationError as exc:
            raise InvalidRequest(validation_message(exc), {"errors": _errors(exc)}) from None
        if scope == "read" and request.granted_paths:
            raise Forbidden("granted_paths needs a write-scope token", {"tool": name})
        if isinstance(request, DiagnosticsInput):  # read scope runs no workspace program
            return await self.diagnostics(request, scope=scope)
        result: BaseModel = await self._handlers[name](request)
        return result

    # ------------------------------------------------------------ one method per tool

    async def file_read(self, req: FileReadInput) -> TextFile | ImageFile:
        return await read.file_read(self.ctx, req, self.io.run)

    async def file_multi_read(self, req: FileMultiReadInput) -> FileMultiReadOutput:
        return await read.file_multi_read(self.ctx, req, self.io.run)

    async def file_list(self, req: FileListInput) -> FileListOutput:
        return await listing.file_list(self.ctx, req)

    async def file_search(self, req: FileSearchInput) -> FileSearchOutput:
        return await search.file_search(self.ctx, req)

    async def file_diff_preview(self, req: FileDiffPreviewInput) -> FileDiffPreviewOutput:
        return await patch.file_diff_preview(self.ctx, req)

    async def diagnostics(
        self, req: DiagnosticsInput, *, scope: Scope = "write"
    ) -> DiagnosticsOutput:
        paths = [self.ctx.resolve(p, intent="read", granted=req.granted_paths) for p in req.paths]
        return await self.ctx.diag.run(paths, req.checks, scope=scope)

    async def file_write(self, req: FileWriteInput) -> FileWriteOutput:
        return await write.file_write(self.ctx, req)

    async def file_patch(self, req: FilePatchInput) -> FilePatchOutput:
        return await patch.file_patch(self.ctx, req)

    async def file_multi_patch(self, req: FileMultiPatchInput) -> FileMultiPatchOutput:
        return await patch.file_multi_patch(self.ctx, req)

    async def apply_patch(self, req: ApplyPatchInput) -> ApplyPatchOutput:
        return await apply_patch_engine.apply_patch(self.ctx, req)

    async def exec(self, req: ExecInput) -> ExecOutput:
        return await exec_mod.exec_tool(self.ctx, req)

    async def process_start(self, req: ProcessStartInput) -> ProcessStartOutput:
        return await self.ctx.procs.start(self.ctx, req)

    async def process_read(self, req: ProcessReadInput) -> ProcessReadOutput:
        return await self.ctx.procs.read(req)

    async def process_write(self, req: ProcessWriteInput) -> ProcessWriteOutput:
        return await self.ctx.procs.write(req)

    async def process_resize(self, req: ProcessResizeInput) -> ProcessResizeOutput:
        return await self.ctx.procs.resize(req)

    async def process_kill(self, req: ProcessKillInput) -> ProcessKillOutput:
        return await self.ctx.procs.kill(req)

    async def process_list(self, req: ProcessListInput) -> ProcessListOutput:
        return self.ctx.procs.list()


def _errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": [str(x) for x in e["loc"]], "msg": e["msg"], "type": e["type"]}
        for e in exc.errors()[:20]
    ]
