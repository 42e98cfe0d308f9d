"""airlock mcp's exec progress once the client has ``exec_stream()`` (the /v1/exec/stream
route): each output event becomes a notification and the result keeps exec's shape.

The route lands with the streaming work; until then this drives the adapter with an
object that yields the contract's events (started, stdout/stderr, exit)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from mcp import types

from airlock.client.mcp import AirlockMCP
from airlock.daemon.protocol import TOOL_SPECS


class StreamingClient:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def exec_stream(self, **args: Any) -> AsyncIterator[dict[str, Any]]:
        self.calls.append(args)
        yield {"type": "started", "pid": 42}
        yield {"type": "stdout", "data": "a" * 6, "offset": 0}
        yield {"type": "stderr", "data": "warn\n", "offset": 0}
        yield {"type": "stdout", "data": "b" * 6, "offset": 6}
        yield {"type": "exit", "exit_code": 3, "timed_out": False, "duration_ms": 12}

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("exec with a progress token must stream")


async def test_stream_events_become_progress_and_an_exec_result() -> None:
    client = StreamingClient()
    app = AirlockMCP(client, [s.info().model_dump() for s in TOOL_SPECS])  # type: ignore[arg-type]
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    content = await app.call(
        "exec",
        {"argv": ["x"], "env": [{"name": "A", "value": "1"}], "max_output_bytes": 8, "keep": None},
        progress,
    )
    assert client.calls == [{"argv": ["x"], "env": {"A": "1"}, "max_output_bytes": 8}]
    assert [m for _, _, m in seen] == ["stdout: aaaaaa", "stderr: warn\n", "stdout: bbbbbb"]
    assert [d for d, _, _ in seen] == [1, 2, 3]
    assert isinstance(content[0], types.TextContent)
    result = json.loads(content[0].text)
    assert result["exit_code"] == 3 and result["duration_ms"] == 12
    assert result["stdout"] == "aabbbbbb" and result["stdout_truncated"] is True  # the tail
    assert result["stderr"] == "warn\n" and result["stderr_truncated"] is False
