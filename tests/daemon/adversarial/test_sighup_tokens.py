"""SIGHUP: an emptied token file revokes every token; a malformed one keeps the old table."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from tests.daemon.adversarial.raw_http import send_raw
from tests.fakes.daemon_harness import RunningDaemon, running_daemon
from tests.fakes.wait import wait_until

TOKEN = "w-" + "5" * 40


def tools_request(token: str) -> bytes:
    return (
        f"GET /v1/tools HTTP/1.1\r\nHost: d\r\nAuthorization: Bearer {token}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()


async def status_with(socket: Path, token: str) -> int:
    return (await send_raw(socket, tools_request(token))).status


async def wait_for_log(daemon: RunningDaemon, text: str) -> None:
    await wait_until(lambda: text in daemon.log(), message=f"{text!r} never logged")


async def test_empty_token_file_revokes_every_token(workspace_dir: Path, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN} write\n")
    async with running_daemon(workspace_dir, extra_args=["--token-file", str(tokens)]) as d:
        assert await status_with(d.socket, TOKEN) == 200
        tokens.write_text("# every sandbox token revoked\n")
        d.process.send_signal(signal.SIGHUP)
        await wait_for_log(d, "every token revoked")
        resp = await send_raw(d.socket, tools_request(TOKEN))
        assert resp.status == 401 and resp.envelope()["code"] == "unauthorized"
        # Health stays open (it never needs a token).
        health = await send_raw(
            d.socket, b"GET /v1/health HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n"
        )
        assert health.status == 200


async def test_malformed_token_file_keeps_the_old_table(
    workspace_dir: Path, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN} write\n")
    async with running_daemon(workspace_dir, extra_args=["--token-file", str(tokens)]) as d:
        for bad in (
            f"{TOKEN} write\nnew-token-without-scope\n",
            f"{TOKEN} admin\n",
            b"\xff\xfe not utf-8\n",
        ):
            if isinstance(bad, bytes):
                tokens.write_bytes(bad)
            else:
                tokens.write_text(bad)
            before = d.log().count("token file not reloaded")
            d.process.send_signal(signal.SIGHUP)

            def refused_again(seen: int = before) -> bool:
                return d.log().count("token file not reloaded") > seen

            await wait_until(refused_again, message="the refused reload was never logged")
            assert await status_with(d.socket, TOKEN) == 200
        log = d.log()
        assert "keeping the previous 1 token(s)" in log
        assert "new-token-without-scope" not in log  # the log names lines, never their content
        # A good file afterwards is taken.
        tokens.write_text("other-token read\n")
        d.process.send_signal(signal.SIGHUP)

        async def old_token_refused() -> bool:
            return await status_with(d.socket, TOKEN) == 401

        await wait_until(old_token_refused, message="the old token was still accepted")
        assert await status_with(d.socket, "other-token") == 200


async def test_malformed_token_file_refuses_start(workspace_dir: Path, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("just-a-token\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.daemon.cli", "--workspace", str(workspace_dir),
        "--socket", str(tmp_path / "d.sock"), "--token-file", str(tokens),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and "TOKEN SCOPE" in lines[0], lines
    assert "just-a-token" not in err.decode()
