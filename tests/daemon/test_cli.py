"""airlockd's command line: the config file, the flag checks, the tooling key."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from airlock.client.daemon import DaemonClient
from tests.fakes.daemon_harness import airlockd_command, wait_for_socket


async def test_config_file_supplies_the_flags(tmp_path: Path) -> None:
    ws, extra = tmp_path / "ws", tmp_path / "extra"
    ws.mkdir()
    extra.mkdir()
    (extra / "x.txt").write_text("from the extra root\n")
    base = Path(tempfile.mkdtemp(prefix="al-c-"))
    socket = base / "d.sock"
    config = tmp_path / "airlockd.toml"
    config.write_text(
        f'workspace = "{ws}"\nsocket = "{socket}"\nextra-root = ["{extra}"]\n'
        f'artifacts-dir = "{base / "art"}"\n'
    )
    proc = await asyncio.create_subprocess_exec(*airlockd_command(), "--config", str(config))
    try:
        await wait_for_socket(socket, proc)
        async with DaemonClient(socket=str(socket)) as client:
            assert (await client.health()).workspace == str(ws.resolve())
            page = await client.file_read(path=str(extra / "x.txt"))
            assert page.kind == "text" and page.content == "from the extra root\n"
        assert (base / "art").is_dir()
    finally:
        proc.terminate()
        await proc.wait()


async def run(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.daemon.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_required_flags_and_bad_workspace(tmp_path: Path) -> None:
    code, _, err = await run("--socket", str(tmp_path / "s.sock"))
    assert code == 2 and "--workspace and --socket are required" in err
    code, _, err = await run("--workspace", str(tmp_path / "missing"), "--socket", "/tmp/al-x.sock")
    assert code == 2 and "is not a directory" in err


async def test_tooling_key_is_stable(tmp_path: Path) -> None:
    first = await run("--tooling-key")
    second = await run("--tooling-key")
    assert first[0] == 0 and len(first[1].strip()) == 64
    assert first[1] == second[1]


async def test_process_limit_and_tracking_flags_are_checked(tmp_path: Path) -> None:
    sock = str(tmp_path / "s.sock")
    code, _, err = await run(
        "--workspace", str(tmp_path), "--socket", sock, "--exec-max-processes", "-1"
    )
    assert code == 2 and "--exec-max-processes" in err and len(err.strip().splitlines()) == 1
    code, _, err = await run(
        "--workspace", str(tmp_path), "--socket", sock, "--exec-tracking", "jail"
    )
    assert code == 2 and "--exec-tracking" in err
