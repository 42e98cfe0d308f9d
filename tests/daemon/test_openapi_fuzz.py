"""airlockd's OpenAPI document, fuzzed with schemathesis against the running daemon.

Every route, valid and invalid input, without a token and with a write token:
no 5xx, and every status, content type and body is the one the document lists.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.client.daemon import DaemonClient
from tests.fakes.daemon_harness import running_daemon
from tests.fakes.fuzz import run_schemathesis
from tests.fakes.net import free_port

pytestmark = pytest.mark.timeout(600)

TOKEN = "fuzz-" + "3" * 40


async def test_schemathesis_finds_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha\nbeta\n")
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN} write\n")
    tokens.chmod(0o600)
    port = free_port()
    args = ["--token-file", str(tokens), "--listen", f"tcp://127.0.0.1:{port}"]
    async with running_daemon(ws, extra_args=args) as daemon:
        async with DaemonClient(url=f"http://127.0.0.1:{port}", token=TOKEN) as client:
            document = await client.openapi()
        assert {"/metrics", "/v1/openapi.json", "/v1/health"} <= set(document["paths"])
        for path, methods in document["paths"].items():
            for method, operation in methods.items():
                if path != "/v1/health":
                    assert "401" in operation["responses"], (method, path)
        base = f"http://127.0.0.1:{port}"
        # POST /v1/watch answers a stream that lasts until the client closes it: every
        # valid example would wait out the request timeout. tests/daemon/test_watch.py
        # covers its answers; the rest of the document is fuzzed.
        fuzzed = {**document, "paths": {**document["paths"]}}
        del fuzzed["paths"]["/v1/watch"]
        for token, label in ((None, "airlockd-no-token"), (TOKEN, "airlockd-token")):
            run_schemathesis(fuzzed, base, tmp_path, token=token, label=label)
        assert daemon.process.returncode is None


async def test_a_nul_in_a_search_pattern_glob_or_type_is_a_400(tmp_path: Path) -> None:
    """schemathesis's first finding: "embedded null byte" from the OS was a 500."""
    from airlock.client.errors import InvalidRequest

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("x\n")
    async with running_daemon(ws) as daemon, daemon.client() as client:
        for args in (
            {"pattern": "a\0b"},
            {"pattern": "x", "glob": "a\0b"},
            {"pattern": "x", "type": "p\0y"},
        ):
            with pytest.raises(InvalidRequest, match="NUL byte"):
                await client.call("file_search", args)
        assert "internal error" not in daemon.log()
