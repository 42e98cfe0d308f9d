"""JSON-RPC methods this MCP SDK does not know get -32601 (method not found), quietly.

The ``mcp`` 1.x session validates every request against the methods it knows
and answers anything else with -32602 (invalid params) after logging a long
validation warning. ``mcp`` 2.x clients open with ``server/discover``, so every
such connection would log it. :class:`AirlockServer` answers a request for an
unknown method with -32601 before the session sees it (and drops an unknown
notification, which gets no answer in JSON-RPC), on every transport, since
stdio and streamable HTTP both call ``Server.run``. Known methods this server
has no handler for (``prompts/list``...) already get -32601 from the SDK.
"""

from __future__ import annotations

import typing
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage


def _methods(union: Any) -> frozenset[str]:
    members = typing.get_args(union.model_fields["root"].annotation)
    return frozenset(typing.get_args(m.model_fields["method"].annotation)[0] for m in members)


KNOWN_REQUESTS = _methods(types.ClientRequest)
KNOWN_NOTIFICATIONS = _methods(types.ClientNotification)


def _not_found(request: types.JSONRPCRequest) -> SessionMessage:
    error = types.ErrorData(
        code=types.METHOD_NOT_FOUND,
        message=f"Method not found: {request.method[:200]}",
    )
    return SessionMessage(
        types.JSONRPCMessage(types.JSONRPCError(jsonrpc="2.0", id=request.id, error=error))
    )


class AirlockServer(Server[Any, Any]):
    """The SDK's low-level server, with unknown methods answered -32601 up front."""

    async def run(self, read_stream: Any, write_stream: Any, *args: Any, **kwargs: Any) -> None:
        forward_in, forward_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def pump() -> None:
            async with forward_in:
                async for item in read_stream:
                    if isinstance(item, SessionMessage):
                        root = item.message.root
                        if (
                            isinstance(root, types.JSONRPCRequest)
                            and root.method not in KNOWN_REQUESTS
                        ):
                            try:
                                await write_stream.send(_not_found(root))
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return
                            continue
                        if (
                            isinstance(root, types.JSONRPCNotification)
                            and root.method not in KNOWN_NOTIFICATIONS
                        ):
                            continue
                    try:
                        await forward_in.send(item)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            try:
                await super().run(forward_out, write_stream, *args, **kwargs)
            finally:
                tg.cancel_scope.cancel()
