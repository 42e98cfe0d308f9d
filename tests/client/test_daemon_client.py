"""DaemonClient and the `airlock tools` / `airlock call` commands against a real airlockd."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airlock.client.daemon import DaemonClient, HunkNotFound, NotFound, PathEscape
from airlock.daemon.protocol import FilePatchInput, TextFile
from tests.fakes.daemon_harness import running_daemon
from tests.fakes.programs import run_airlock


async def test_typed_methods_and_typed_errors(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\nworld\n")
    async with running_daemon(tmp_path) as d, d.client() as client:
        page = await client.file_read(path="a.txt")
        assert isinstance(page, TextFile) and page.total_lines == 2
        patched = await client.file_patch(
            FilePatchInput(path="a.txt", old_string="world", new_string="there")
        )
        assert patched.replacements == 1 and patched.match == "exact"
        ran = await client.exec(argv=["cat", "a.txt"])
        assert ran.stdout == "hello\nthere\n"
        with pytest.raises(PathEscape):
            await client.file_read(path="/etc/passwd")
        with pytest.raises(NotFound):
            await client.file_read(path="missing")
        with pytest.raises(HunkNotFound) as info:
            await client.file_patch(path="a.txt", old_string="nope", new_string="x")
        assert info.value.details["path"] == "a.txt"
        assert (await client.health()).status == "ok"
        assert {t.name for t in await client.tools()} >= {"file_read", "apply_patch", "exec"}
        assert "airlockd_tool_calls_total" in await client.metrics()


def test_needs_exactly_one_transport() -> None:
    with pytest.raises(ValueError):
        DaemonClient()
    with pytest.raises(ValueError):
        DaemonClient(socket="/x", url="http://y")


async def test_cli_tools_and_call(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    async with running_daemon(tmp_path) as d:
        sock = str(d.socket)
        code, out, _ = await run_airlock("tools", "--socket", sock)
        assert code == 0 and "file_read" in out and "read-only" in out
        code, out, _ = await run_airlock("call", "--socket", sock, "file_read", '{"path": "a.txt"}')
        assert code == 0 and json.loads(out)["content"] == "hello\n"
        code, out, _ = await run_airlock(
            "call", "--socket", sock, "file_read", '{"path": "/etc/passwd"}'
        )
        assert code == 1 and json.loads(out)["error"]["code"] == "path_escape"
        code, _, err = await run_airlock("call", "--socket", sock, "file_read", "{not json")
        assert code == 2 and "not JSON" in err
