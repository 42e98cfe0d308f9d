"""``airlock mcp --http`` requires its bearer token: the official Python and TypeScript clients
without it, with a wrong one and with the right one; a non-loopback bind without one is refused."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from airlock.client.mcp.transports import bearer_ok, check_bind, is_loopback
from tests.fakes.daemon_harness import RunningDaemon, running_daemon
from tests.fakes.net import free_port, wait_port
from tests.fakes.procs import stop_process
from tests.fakes.toolchains import npm_modules
from tests.fakes.trees import write_tree

TOKEN = "mcp-" + "7" * 40
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@contextlib.asynccontextmanager
async def mcp_http(daemon: RunningDaemon, tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    """``airlock mcp --http`` on loopback with a token file; yields (URL, stderr file)."""
    token_file = tmp_path / "mcp-token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    port = free_port()
    errors = tmp_path / "mcp.stderr"
    with errors.open("wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "airlock.client.cli", "mcp",
                "--daemon", f"unix:{daemon.socket}",
                "--http", f"127.0.0.1:{port}", "--http-token-file", str(token_file),
            ],
            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
        )  # fmt: skip
    try:
        await wait_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp", errors
    finally:
        stop_process(proc, timeout=10, group=True)


async def _session_works(url: str, headers: dict[str, str]) -> str:
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool("exec", {"argv": ["sh", "-c", "echo ran"]})
        assert not result.isError, result.content
        first = result.content[0]
        assert isinstance(first, types.TextContent)
        return str(json.loads(first.text)["stdout"])


async def _refused(url: str, headers: dict[str, str]) -> None:
    """The official client cannot get a session: its first POST is answered 401."""
    with pytest.raises(BaseExceptionGroup) as caught, anyio.fail_after(20):
        await _session_works(url, headers)
    leaves = _leaves(caught.value)
    assert any(
        isinstance(e, httpx.HTTPStatusError) and e.response.status_code == 401 for e in leaves
    ), leaves


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "ws", {"notes.txt": "alpha\n"})


async def test_bearer_token_official_python_client(workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran-without-token"
    async with running_daemon(workspace) as daemon, mcp_http(daemon, tmp_path) as (url, _):
        # Raw: no header, a wrong token, the wrong scheme: 401 with a challenge, nothing runs.
        exec_call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "exec", "arguments": {"argv": ["touch", str(marker)]}},
        }
        async with httpx.AsyncClient() as http:
            for auth in (None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x"):
                headers = dict(ACCEPT)
                if auth is not None:
                    headers["Authorization"] = auth
                for body in (INIT, exec_call):
                    resp = await http.post(url, json=body, headers=headers)
                    assert resp.status_code == 401, (auth, resp.status_code, resp.text)
                    assert resp.headers["www-authenticate"].startswith("Bearer")
                    assert "Authorization: Bearer" in resp.json()["error"]["message"]
                    assert TOKEN not in resp.text
            ok = await http.post(
                url, json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
            )
            assert ok.status_code == 200, ok.text
            # Over HTTP too, an unknown method (mcp 2.x's opening request) is -32601.
            discover = await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 7, "method": "server/discover", "params": {}},
                headers={**ACCEPT, "Authorization": f"Bearer {TOKEN}"},
            )
            assert discover.status_code == 200, discover.text
            answers = [
                json.loads(line[len("data:") :])
                for line in discover.text.splitlines()
                if line.startswith("data:")
            ] or [discover.json()]
            assert answers[0]["id"] == 7 and answers[0]["error"]["code"] == -32601
        assert not marker.exists()
        # The official client: refused without / with a wrong token, served with the right one.
        await _refused(url, {})
        await _refused(url, {"Authorization": "Bearer not-the-token"})
        assert await _session_works(url, {"Authorization": f"Bearer {TOKEN}"}) == "ran\n"
        assert not marker.exists()


TS_CLIENT = r"""
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

async function attempt(url, token) {
  const headers = token === null ? {} : { Authorization: `Bearer ${token}` };
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: "ts-check", version: "0" });
  try {
    await client.connect(transport);
    const tools = await client.listTools();
    const read = await client.callTool({ name: "file_read", arguments: { path: "notes.txt" } });
    const info = client.getServerVersion();
    await client.close();
    return { ok: true, tools: tools.tools.length, text: read.content[0].text, version: info.version };
  } catch (err) {
    return { ok: false, code: err && err.code, error: String(err && err.message || err) };
  }
}

const [url, token] = process.argv.slice(2);
const out = {
  none: await attempt(url, null),
  wrong: await attempt(url, "wrong-token"),
  right: await attempt(url, token),
};
console.log(JSON.stringify(out));
"""


async def test_bearer_token_typescript_sdk(workspace: Path, tmp_path: Path) -> None:
    modules, why = await anyio.to_thread.run_sync(
        npm_modules, "mcp-ts-sdk", ["@modelcontextprotocol/sdk@1"]
    )
    if modules is None:
        pytest.skip(f"the MCP TypeScript SDK test did not run: {why}")
    script = modules / "check-auth.mjs"
    script.write_text(TS_CLIENT)
    async with running_daemon(workspace) as daemon, mcp_http(daemon, tmp_path) as (url, _):
        proc = await anyio.run_process(["node", str(script), url, TOKEN], cwd=modules, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    out: dict[str, Any] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    for refused in (out["none"], out["wrong"]):
        assert refused["ok"] is False and refused["code"] == 401, out
        assert "Authorization: Bearer" in refused["error"]
    right = out["right"]
    assert right["ok"] is True, out
    assert right["tools"] >= 5 and "alpha" in right["text"]
    from airlock import __version__

    assert right["version"] == __version__


def test_a_non_loopback_bind_without_a_token_is_refused(tmp_path: Path) -> None:
    # No daemon needed: the refusal comes before anything connects or binds.
    for host in ("0.0.0.0", "192.0.2.10", "[::]"):
        proc = subprocess.run(
            [
                sys.executable, "-m", "airlock.client.cli", "mcp",
                "--daemon", f"unix:{tmp_path / 'none.sock'}", "--http", f"{host}:8765",
            ],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "--http-token-file" in lines[0], proc.stderr
        assert "Traceback" not in proc.stderr
    # A token file that is empty is refused too, naming the flag.
    empty = tmp_path / "empty"
    empty.write_text("\n")
    proc = subprocess.run(
        [
            sys.executable, "-m", "airlock.client.cli", "mcp",
            "--daemon", f"unix:{tmp_path / 'none.sock'}",
            "--http", "127.0.0.1:8765", "--http-token-file", str(empty),
        ],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "--http-token-file" in proc.stderr


def test_bind_and_bearer_rules() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("127.8.9.10") and is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1")
    assert not is_loopback("example.test")
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", "tok")
    with pytest.raises(ValueError, match="--http-token-file"):
        check_bind("0.0.0.0", None)
    token = b"abc"
    assert bearer_ok({"headers": [(b"authorization", b"Bearer abc")]}, token)
    assert bearer_ok({"headers": [(b"authorization", b"bearer  abc ")]}, token)
    assert not bearer_ok({"headers": [(b"authorization", b"Bearer abd")]}, token)
    assert not bearer_ok({"headers": [(b"authorization", b"Basic abc")]}, token)
    assert not bearer_ok({"headers": []}, token)
