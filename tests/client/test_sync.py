"""airlock.client.sync: the blocking client end to end against a real airlockd."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from airlock.client.errors import ClientError, PathEscape
from airlock.client.sync import DaemonClient
from airlock.daemon.protocol import FilePatchInput, TextFile
from tests.fakes.daemon_harness import running_daemon


def _session(socket: str) -> None:
    with DaemonClient(socket=socket) as client:
        assert client.health().status == "ok"
        assert "file_read" in {t.name for t in client.tools()}
        page = client.file_read(path="a.txt")
        assert isinstance(page, TextFile) and page.content == "hello\nworld\n"
        patched = client.file_patch(
            FilePatchInput(path="a.txt", old_string="world", new_string="there")
        )
        assert patched.replacements == 1
        ran = client.exec(argv=["cat", "a.txt"], env={"X": "1"})
        assert ran.stdout == "hello\nthere\n"
        assert client.call("file_list", {})["entries"]
        assert (
            client.call_model(
                "exec", {"argv": ["true"], "env": [{"name": "A", "value": "b"}], "stdin": None}
            )["exit_code"]
            == 0
        )
        with pytest.raises(PathEscape):
            client.file_read(path="/etc/hostname")
        with pytest.raises(ClientError):
            client.call_model("file_read", {"path": "/etc/hostname", "granted_paths": ["/etc"]})
    client.close()  # idempotent


async def test_sync_client_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\nworld\n")
    async with running_daemon(tmp_path) as daemon:
        # Blocking code runs in a worker thread, as a synchronous framework would.
        await asyncio.to_thread(_session, str(daemon.socket))
