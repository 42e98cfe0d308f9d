"""exec: argv without a shell, process groups, caps and spills."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from pathlib import Path

import pytest

from airlock.daemon.errors import AirlockError
from airlock.daemon.protocol import ExecInput
from airlock.daemon.workspace import Workspace
from tests.daemon.conftest import ToolCall
from tests.fakes.wait import wait_until


def alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie nobody has reaped yet counts as dead."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


async def wait_dead(pid: int) -> bool:
    with contextlib.suppress(AssertionError):
        await wait_until(lambda: not alive(pid), timeout=5)
    return not alive(pid)


async def test_no_shell(tool_call: ToolCall, workspace_dir: Path) -> None:
    out = await tool_call("exec", {"argv": ["echo", "$HOME", ";", "rm", "-rf", "/"]})
    assert out["stdout"] == "$HOME ; rm -rf /\n" and out["exit_code"] == 0


async def test_cwd_env_stdin_exit_code(tool_call: ToolCall, workspace_dir: Path) -> None:
    (workspace_dir / "sub").mkdir()
    script = "import os,sys; print(os.getcwd()); print(os.environ['X']); print(sys.stdin.read()); sys.exit(3)"
    out = await tool_call(
        "exec",
        {"argv": [sys.executable, "-c", script], "cwd": "sub", "env": {"X": "y"}, "stdin": "piped"},
    )
    assert out["stdout"].split("\n")[:3] == [str((workspace_dir / "sub").resolve()), "y", "piped"]
    assert out["exit_code"] == 3 and out["signal"] is None and not out["timed_out"]


async def test_missing_program(tool_call: ToolCall) -> None:
    with pytest.raises(AirlockError) as info:
        await tool_call("exec", {"argv": ["definitely-not-a-program-xyz"]})
    assert info.value.code == "not_found"


async def test_timeout_kills_the_whole_group(tool_call: ToolCall, workspace_dir: Path) -> None:
    marker = workspace_dir / "grandchild.pid"
    script = (
        "import signal,subprocess;"
        f"p=subprocess.Popen(['sleep','30']); open({str(marker)!r},'w').write(str(p.pid));"
        "signal.pause()"
    )
    started = time.monotonic()
    out = await tool_call("exec", {"argv": [sys.executable, "-c", script], "timeout_s": 1})
    assert out["timed_out"] is True and out["signal"] == 9 and out["exit_code"] is None
    assert time.monotonic() - started < 10
    pid = int(marker.read_text())
    assert await wait_dead(pid), "the grandchild outlived its group"


@pytest.mark.parametrize("keep", ["tail", "head"])
async def test_output_cap_keeps_one_end_and_spills(tool_call: ToolCall, keep: str) -> None:
    script = "import sys; [print(f'line {i:05d}') for i in range(20000)]"
    out = await tool_call(
        "exec",
        {"argv": [sys.executable, "-c", script], "max_output_bytes": 1000, "keep": keep},
    )
    assert out["stdout_truncated"] is True and len(out["stdout"]) == 1000
    if keep == "tail":
        assert out["stdout"].endswith("line 19999\n")
    else:
        assert out["stdout"].startswith("line 00000\n")
    spilled = Path(out["spill_path"]).read_text()
    assert spilled.count("\n") == 20000
    # The spill is readable through the read tools (artifacts are a read root).
    page = await tool_call("file_read", {"path": out["spill_path"], "limit": 1})
    assert page["content"] == "line 00000\n"


async def test_cancellation_kills_the_group(in_process: Workspace, workspace_dir: Path) -> None:
    marker = workspace_dir / "child.pid"
    script = f"import os,signal; open({str(marker)!r},'w').write(str(os.getpid())); signal.pause()"
    task = asyncio.create_task(in_process.exec(ExecInput(argv=[sys.executable, "-c", script])))
    await wait_until(lambda: marker.exists() and marker.read_text(), message="child never started")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pid = int(marker.read_text())
    assert await wait_dead(pid), "the child outlived the cancelled call"


async def test_background_child_holding_pipes_does_not_hang(tool_call: ToolCall) -> None:
    script = "import subprocess; subprocess.Popen(['sleep','30']); print('parent done')"
    started = time.monotonic()
    out = await tool_call("exec", {"argv": [sys.executable, "-c", script]})
    assert out["stdout"] == "parent done\n" and out["exit_code"] == 0
    assert time.monotonic() - started < 10
