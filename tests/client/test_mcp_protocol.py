"""``airlock mcp`` at the JSON-RPC level: unknown methods get -32601 without log spam,
``serverInfo.version`` is airlock's, and every served schema passes the OpenAI Agents SDK's
strict conversion (with maps served as ``{name, value}`` lists and turned back on the call)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from airlock import __version__
from airlock.client.mcp.schemas import served_schema
from airlock.client.tools import model_facing_schema
from airlock.daemon.protocol import TOOL_SPECS
from tests.fakes.daemon_harness import RunningDaemon, running_daemon
from tests.fakes.toolchains import env_without_venv, python_venv

INIT_PARAMS = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"},
}


class RawStdio:
    """``airlock mcp`` on pipes, spoken to one JSON-RPC line at a time."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 0

    async def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        assert self.proc.stdout is not None
        while True:
            line = await asyncio.wait_for(self.proc.stdout.readline(), 30)
            assert line, "airlock mcp closed stdout"
            answer = json.loads(line)
            if answer.get("id") == self.next_id:
                return answer


async def _raw(daemon: RunningDaemon, stderr: Path) -> RawStdio:
    with stderr.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "airlock.client.cli", "mcp", "--daemon", f"unix:{daemon.socket}",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
        )  # fmt: skip
    return RawStdio(proc)


async def _close(raw: RawStdio) -> None:
    assert raw.proc.stdin is not None
    raw.proc.stdin.close()
    try:
        await asyncio.wait_for(raw.proc.wait(), 10)
    except TimeoutError:
        raw.proc.kill()
        await raw.proc.wait()


async def test_unknown_methods_get_method_not_found_quietly(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    stderr = tmp_path / "mcp.stderr"
    async with running_daemon(ws) as daemon:
        raw = await _raw(daemon, stderr)
        try:
            # What every mcp 2.x client sends first, before initialize.
            first = await raw.request("server/discover", {})
            assert first["error"]["code"] == -32601, first
            assert "server/discover" in first["error"]["message"]
            init = await raw.request("initialize", INIT_PARAMS)
            assert init["result"]["serverInfo"]["version"] == __version__
            assert init["result"]["serverInfo"]["name"] == "airlock"
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await raw.send({"jsonrpc": "2.0", "method": "notifications/made_up", "params": {}})
            again = await raw.request("no/such/method", {"x": 1})
            assert again["error"]["code"] == -32601
            # Known to the SDK, not served here: also -32601.
            prompts = await raw.request("prompts/list", {})
            assert prompts["error"]["code"] == -32601
            listed = await raw.request("tools/list", {})
            assert any(t["name"] == "exec" for t in listed["result"]["tools"])
        finally:
            await _close(raw)
    log = stderr.read_text()
    assert "Failed to validate" not in log and "WARNING" not in log.upper(), log


async def test_env_is_served_as_pairs_and_turned_back(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    async with running_daemon(ws) as daemon:
        raw = await _raw(daemon, tmp_path / "mcp.stderr")
        try:
            await raw.request("initialize", INIT_PARAMS)
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            tools = (await raw.request("tools/list", {}))["result"]["tools"]
            by_name = {t["name"]: t for t in tools}
            for name in ("exec", "process_start"):
                env = by_name[name]["inputSchema"]["properties"]["env"]
                assert env["type"] == "array", env
                assert env["items"]["required"] == ["name", "value"]
            called = await raw.request(
                "tools/call",
                {
                    "name": "exec",
                    "arguments": {
                        "argv": ["sh", "-c", 'printf %s "$GREETING"'],
                        "env": [{"name": "GREETING", "value": "hello pairs"}],
                    },
                },
            )
            result = called["result"]
            assert not result.get("isError"), result
            assert json.loads(result["content"][0]["text"])["stdout"] == "hello pairs"
        finally:
            await _close(raw)
        # The daemon's own route still takes the map.
        async with daemon.client() as client:
            out = await client.call(
                "exec", {"argv": ["sh", "-c", 'printf %s "$GREETING"'], "env": {"GREETING": "map"}}
            )
            assert out["stdout"] == "map"


STRICT_CHECK = """
import json, sys
from agents.strict_schema import ensure_strict_json_schema
out = {}
for name, schema in json.load(sys.stdin).items():
    try:
        ensure_strict_json_schema(schema)
        out[name] = "ok"
    except Exception as exc:
        out[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


async def test_every_served_schema_passes_the_agents_sdk_strict_conversion(
    tmp_path: Path,
) -> None:
    python, why = await anyio.to_thread.run_sync(
        python_venv, "openai-agents", ["openai-agents>=0.2"]
    )
    if python is None:
        pytest.skip(f"the OpenAI Agents SDK strict-schema check did not run: {why}")
    from airlock.client.mcp import AirlockMCP
    from airlock.client.tools import github_shell_tool

    catalog = [spec.info().model_dump(mode="json") for spec in TOOL_SPECS]
    app = AirlockMCP(client=None, catalog=catalog)  # type: ignore[arg-type]
    served = {t.name: t.inputSchema for t in app.tools}
    assert set(served) == {spec.name for spec in TOOL_SPECS}
    served["github_shell"] = served_schema(model_facing_schema(github_shell_tool()))
    # The check can fail: the raw model-facing schema of exec (env as a map) must not pass.
    raw_exec = model_facing_schema(catalog[[s.name for s in TOOL_SPECS].index("exec")])
    served["(unconverted exec)"] = raw_exec

    proc = subprocess.run(
        [str(python), "-c", STRICT_CHECK],
        input=json.dumps(served),
        capture_output=True,
        text=True,
        timeout=120,
        env=env_without_venv(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    assert "additionalProperties" in results.pop("(unconverted exec)")
    failed = {name: why for name, why in results.items() if why != "ok"}
    assert not failed, failed
