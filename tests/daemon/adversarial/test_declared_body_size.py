"""A declared ``Content-Length`` over the route's limit is answered 413 at once.

aiohttp counts body bytes only as they arrive, so a client declaring 100 GB
and sending nothing held its handler until the body timeout (60 s). Here the
client sends the head alone and must get the envelope within a few seconds
(far below the body timeout, which is set long to tell the two apart), on a
tool route and on the streaming exec route. A body at the limit is still read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

from tests.daemon.adversarial.raw_http import read_response
from tests.fakes.daemon_harness import running_daemon

LIMIT = 4096
ANSWER_WITHIN_S = 10.0  # the body timeout below is 300 s: only the declared size can answer


async def _head_only(socket: Path, route: str, declared: int) -> tuple[int, dict[str, object]]:
    reader, writer = await asyncio.open_unix_connection(str(socket))
    try:
        writer.write(
            f"POST {route} HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
            f"Content-Length: {declared}\r\n\r\n".encode()
        )
        await writer.drain()
        resp = await read_response(reader, timeout=ANSWER_WITHIN_S)
        return resp.status, resp.envelope()
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def test_declared_oversize_bodies_get_413_without_sending_them(workspace_dir: Path) -> None:
    (workspace_dir / "a.txt").write_text("hello\n")
    async with running_daemon(
        workspace_dir, extra_args=["--max-body-bytes", str(LIMIT), "--body-timeout", "300"]
    ) as d:
        for route, declared in (
            ("/v1/tools/file_write", 100 * 1000**3),  # 100 GB
            ("/v1/tools/file_read", LIMIT + 1),
            ("/v1/exec/stream", 100 * 1000**3),
        ):
            status, err = await _head_only(d.socket, route, declared)
            assert status == 413 and err["code"] == "too_large", (route, status, err)
            assert f"{declared}-byte body" in str(err["message"])
            assert err["details"] == {"declared": declared, "limit": LIMIT}

        # At the limit, the body is read and the tool runs.
        body = json.dumps({"path": "a.txt"}).encode().ljust(LIMIT, b" ")
        reader, writer = await asyncio.open_unix_connection(str(d.socket))
        writer.write(
            b"POST /v1/tools/file_read HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        resp = await read_response(reader)
        writer.close()
        assert resp.status == 200 and json.loads(resp.body)["content"] == "hello\n"
