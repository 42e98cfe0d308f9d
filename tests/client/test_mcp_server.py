"""`airlock mcp` driven by the official `mcp` client, over stdio and streamable HTTP,
against a real airlockd."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client import streamable_http
from mcp.client.stdio import stdio_client

from tests.fakes.daemon_harness import RunningDaemon, running_daemon
from tests.fakes.github import FakeGitHub
from tests.fakes.github_proxy import GITHUB_HOSTS, proxy_for
from tests.fakes.net import free_port, wait_port
from tests.fakes.procs import stop_process
from tests.fakes.trees import write_tree
from tests.fakes.wait import wait_until

# The SDK renamed the streamable HTTP client; use whichever this 1.x version has.
http_client = getattr(streamable_http, "streamable_http_client", None) or (
    streamable_http.streamablehttp_client
)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PATCH = """*** Begin Patch
*** Update File: notes.txt
@@
 alpha
-beta
+BETA
*** End Patch"""


def _mcp_argv(daemon: RunningDaemon, *extra: str) -> list[str]:
    return ["-m", "airlock.client.cli", "mcp", "--daemon", f"unix:{daemon.socket}", *extra]


@contextlib.asynccontextmanager
async def stdio_session(daemon: RunningDaemon, *extra: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=_mcp_argv(daemon, *extra), env=dict(os.environ)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def http_session(daemon: RunningDaemon) -> AsyncIterator[ClientSession]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, *_mcp_argv(daemon, "--http", f"127.0.0.1:{port}")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        await wait_port(port, proc)
        async with (
            http_client(f"http://127.0.0.1:{port}/mcp") as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
    finally:
        stop_process(proc, timeout=10, group=True)
        assert proc.stderr is not None
        proc.stderr.close()


def _json(result: types.CallToolResult) -> Any:
    assert not result.isError, result.content
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return json.loads(first.text)


async def _exercise(session: ClientSession, workspace: Path) -> None:
    listed = await session.list_tools()
    names = {t.name for t in listed.tools}
    assert {"file_read", "file_search", "file_patch", "apply_patch", "exec"} <= names
    dumped = [t.model_dump(mode="json") for t in listed.tools]
    assert "granted_paths" not in json.dumps(dumped)
    by_name = {t.name: t for t in listed.tools}
    read_ann = by_name["file_read"].annotations
    assert read_ann is not None and read_ann.readOnlyHint is True
    write_ann = by_name["file_write"].annotations
    assert write_ann is not None and write_ann.readOnlyHint is False
    assert write_ann.destructiveHint is True and write_ann.idempotentHint is True

    page = _json(await session.call_tool("file_read", {"path": "notes.txt"}))
    assert page["content"] == "alpha\nbeta\n"
    found = _json(await session.call_tool("file_search", {"pattern": "alpha"}))
    assert found["files"] == ["notes.txt"]
    patched = _json(
        await session.call_tool(
            "file_patch", {"path": "notes.txt", "old_string": "alpha", "new_string": "ALPHA"}
        )
    )
    assert patched["replacements"] == 1
    (workspace / "notes.txt").write_text("alpha\nbeta\n")
    applied = _json(await session.call_tool("apply_patch", {"patch": PATCH}))
    assert applied["files"][0]["path"] == "notes.txt"
    assert (workspace / "notes.txt").read_text() == "alpha\nBETA\n"
    ran = _json(await session.call_tool("exec", {"argv": ["echo", "hi"], "env": {"A": "1"}}))
    assert ran["stdout"] == "hi\n" and ran["exit_code"] == 0

    # A daemon refusal is a tool result with isError and the envelope's message.
    failed = await session.call_tool("file_read", {"path": "missing.txt"})
    assert failed.isError
    text = failed.content[0]
    assert isinstance(text, types.TextContent) and "missing.txt" in text.text

    image = await session.call_tool("file_read", {"path": "pixel.png"})
    assert not image.isError
    first = image.content[0]
    assert isinstance(first, types.ImageContent)
    assert first.mimeType == "image/png" and base64.b64decode(first.data) == PNG


async def _granted_paths_refused(session: ClientSession, workspace: Path) -> None:
    """A model cannot reach outside the workspace by adding granted_paths to a call."""
    outside = workspace.parent / "outside.txt"
    outside.write_text("secret\n")
    read = await session.call_tool(
        "file_read", {"path": str(outside), "granted_paths": [str(outside.parent)]}
    )
    assert read.isError
    assert "secret" not in json.dumps([c.model_dump() for c in read.content])
    target = workspace.parent / "written.txt"
    wrote = await session.call_tool(
        "file_write",
        {"path": str(target), "content": "x", "granted_paths": [str(workspace.parent)]},
    )
    assert wrote.isError and not target.exists()


def _workspace(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "ws", {"notes.txt": "alpha\nbeta\n", "pixel.png": PNG})


async def test_mcp_over_stdio(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    async with running_daemon(ws) as daemon, stdio_session(daemon) as session:
        await _exercise(session, ws)
        await _granted_paths_refused(session, ws)


async def test_mcp_over_streamable_http(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    async with running_daemon(ws) as daemon, http_session(daemon) as session:
        await _exercise(session, ws)
        await _granted_paths_refused(session, ws)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_long_exec_sends_progress(tmp_path: Path, transport: str) -> None:
    ws = _workspace(tmp_path)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with running_daemon(ws) as daemon:
        opener = stdio_session(daemon) if transport == "stdio" else http_session(daemon)
        async with opener as session:
            # The command ends only once two progress notifications have arrived.
            flag = ws / "go"
            script = f"while [ ! -e {flag} ]; do sleep 0.05; done; echo done"
            call = asyncio.ensure_future(
                session.call_tool(
                    "exec", {"argv": ["sh", "-c", script]}, progress_callback=on_progress
                )
            )
            with contextlib.suppress(AssertionError):
                await wait_until(lambda: len(seen) >= 2 or call.done(), timeout=60)
            flag.write_text("")
            result = await call
    assert len(seen) >= 2, seen
    assert seen[0][0] < seen[-1][0]  # progress increases
    assert _json(result)["stdout"] == "done\n"


async def test_tools_filter_and_bad_flags(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    async with (
        running_daemon(ws) as daemon,
        stdio_session(daemon, "--tools", "file_read,file_list") as session,
    ):
        listed = await session.list_tools()
        assert sorted(t.name for t in listed.tools) == ["file_list", "file_read"]
        refused = await session.call_tool("exec", {"argv": ["true"]})
        assert refused.isError
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.client.cli", "mcp", "--daemon", "nowhere",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    assert proc.returncode == 2 and b"unix:PATH or tcp://HOST:PORT" in err


async def test_github_shell_is_served_with_a_proxy_and_credentials(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    key = tmp_path / "app.pem"
    key.write_text(fake_github.app_private_key_pem)
    ws = _workspace(tmp_path)
    async with proxy_for(fake_github, tmp_path / "proxy") as proxy:
        async with proxy.client() as pc:
            session = await pc.create_session(allow=list(GITHUB_HOSTS))
        sandbox_env = proxy.client_env(session, HOME=str(tmp_path))
        async with running_daemon(ws, env=sandbox_env) as daemon:
            flags = [
                "--proxy-control", proxy.control, "--session", session.session_id,
                "--github-org", "acme", "--app-id", str(fake_github.app_id),
                "--app-key-file", str(key), "--github-api-url", fake_github.api_url,
                "--github-api-ca-file", str(fake_github.ca_path),
            ]  # fmt: skip
            async with stdio_session(daemon, *flags) as session_:
                tools = {t.name: t for t in (await session_.list_tools()).tools}
                assert "github_shell" in tools
                ann = tools["github_shell"].annotations
                assert ann is not None and ann.openWorldHint is True
                perms = [
                    {"provider": "github", "repositories": ["acme/widgets"], "access": "write"}
                ]
                ok = await session_.call_tool(
                    "github_shell",
                    {
                        "command": "gh api repos/acme/widgets --jq .default_branch",
                        "permissions": perms,
                        "description": "read the default branch",
                    },
                )
                assert _json(ok)["stdout"].strip() == "main"
                denied = await session_.call_tool(
                    "github_shell",
                    {
                        "command": "gh pr view 1 --repo acme/other",
                        "permissions": perms,
                        "description": "outside the declared repository",
                    },
                )
                assert denied.isError
                text = denied.content[0]
                assert isinstance(text, types.TextContent) and "acme/other" in text.text
    assert fake_github.mints
    assert all(m.token not in json.dumps(_json(ok)) for m in fake_github.mints)


async def test_http_on_loopback_refuses_a_foreign_host_header(tmp_path: Path) -> None:
    import httpx

    ws = _workspace(tmp_path)
    port = free_port()
    async with running_daemon(ws) as daemon:
        proc = subprocess.Popen(
            [sys.executable, *_mcp_argv(daemon, "--http", f"127.0.0.1:{port}")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            await wait_port(port, proc)
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            headers = {"Accept": "application/json, text/event-stream"}
            async with httpx.AsyncClient() as http:
                evil = await http.post(
                    f"http://127.0.0.1:{port}/mcp",
                    json=body,
                    headers={**headers, "Host": "attacker.example"},
                )
                rebound = await http.post(
                    f"http://127.0.0.1:{port}/mcp",
                    json=body,
                    headers={**headers, "Origin": "http://attacker.example"},
                )
            # Without the guard both would reach the session layer (400, missing session).
            assert evil.status_code == 421 and "Host" in evil.text
            assert rebound.status_code == 403 and "Origin" in rebound.text
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
