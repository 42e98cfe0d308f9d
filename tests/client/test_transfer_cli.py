"""``airlock cp`` and ``airlock watch`` against a real airlockd, as an operator runs them."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.fakes.agent_daemon import WRITE_TOKEN, AgentDaemon

pytestmark = pytest.mark.asyncio(loop_scope="module")


def cli(agent: AgentDaemon, *argv: str) -> list[str]:
    return [
        sys.executable, "-m", "airlock.client.cli", argv[0],
        "--socket", str(agent.daemon.socket), "--token", WRITE_TOKEN, *argv[1:],
    ]  # fmt: skip


async def run(agent: AgentDaemon, *argv: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *cli(agent, *argv), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_cp_both_ways_files_and_trees(agent: AgentDaemon, tmp_path: Path) -> None:
    local = tmp_path / "note.txt"
    local.write_text("hello sandbox\n")
    local.chmod(0o640)
    code, out, err = await run(agent, "cp", "-p", str(local), "sandbox:inbox/note.txt")
    assert code == 0, err
    landed = agent.workspace / "inbox" / "note.txt"
    assert landed.read_text() == "hello sandbox\n" and (landed.stat().st_mode & 0o777) == 0o640
    assert "sha256" in out

    back = tmp_path / "back"
    back.mkdir()
    code, out, err = await run(agent, "cp", "sandbox:inbox/note.txt", str(back))
    assert code == 0, err
    assert (back / "note.txt").read_text() == "hello sandbox\n"

    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "a" / "b.txt").write_text("b")
    code, out, err = await run(agent, "cp", str(tree), "sandbox:trees/t1")
    assert code == 0, err
    assert (agent.workspace / "trees" / "t1" / "a" / "b.txt").read_text() == "b"
    code, out, err = await run(agent, "cp", "sandbox:trees/t1", str(tmp_path / "t1-back"))
    assert code == 0, err
    assert (tmp_path / "t1-back" / "a" / "b.txt").read_text() == "b"

    code, out, err = await run(agent, "cp", str(local), str(tmp_path / "x"))
    assert code == 2 and "sandbox:PATH" in err
    code, out, err = await run(agent, "cp", str(local), "sandbox:../escape.txt")
    assert code == 1 and "path_escape" in err
    code, out, err = await run(agent, "cp", "sandbox:missing.txt", str(tmp_path / "m"))
    assert code == 1 and "not_found" in err and not (tmp_path / "m").exists()


async def test_watch_prints_changes(agent: AgentDaemon) -> None:
    (agent.workspace / "watched").mkdir()
    proc = await asyncio.create_subprocess_exec(
        *cli(agent, "watch", "watched", "--json"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None and proc.stdout is not None
        ready = await asyncio.wait_for(proc.stderr.readline(), 20)
        assert b"watching watched" in ready
        (agent.workspace / "watched" / "w.txt").write_text("w")
        line = await asyncio.wait_for(proc.stdout.readline(), 20)
        assert json.loads(line) == {"type": "created", "path": "watched/w.txt", "is_dir": False}
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def test_the_blocking_client_transfers_too(agent: AgentDaemon, tmp_path: Path) -> None:
    from airlock.client.sync import DaemonClient as SyncClient

    def work() -> None:
        (tmp_path / "s.txt").write_text("sync")
        with SyncClient(socket=str(agent.daemon.socket), token=WRITE_TOKEN) as client:
            assert client.upload(tmp_path / "s.txt", "sync/s.txt").bytes == 4
            client.download("sync/s.txt", tmp_path / "s2.txt")
            client.download_tree("sync", tmp_path / "tree")
            assert client.upload_tree(tmp_path / "tree", "sync2").files == 1

    await asyncio.to_thread(work)
    assert (tmp_path / "s2.txt").read_text() == "sync"
    assert (agent.workspace / "sync2" / "s.txt").read_text() == "sync"
