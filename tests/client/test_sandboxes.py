"""Sandbox implementations: LocalSandbox, DaemonSandbox (real airlockd), DockerSandbox."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from airlock.client.sandboxes import DaemonSandbox, DockerSandbox, LocalSandbox, RunResult, Sandbox
from tests.fakes.daemon_harness import running_daemon
from tests.fakes.procs import LINGER_ARGV
from tests.fakes.wait import pid_alive, wait_until


async def test_local_runs_argv_without_a_shell(tmp_path: Path) -> None:
    sandbox = LocalSandbox(base_env={"PATH": os.environ["PATH"], "BASE": "1"})
    assert isinstance(sandbox, Sandbox)
    result = await sandbox.run(
        [
            sys.executable,
            "-c",
            "import os,sys; print(os.getcwd()); print(os.environ['BASE'], os.environ['X']); print(sys.argv[1])",
            "$(id); echo",
        ],
        str(tmp_path),
        {"X": "2"},
        10,
    )
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == str(tmp_path)
    assert lines[1] == "1 2"
    assert lines[2] == "$(id); echo"


async def test_local_environment_is_only_what_was_given(tmp_path: Path) -> None:
    os.environ["AIRLOCK_TEST_SECRET"] = "do-not-inherit"
    try:
        sandbox = LocalSandbox(base_env={"PATH": os.environ["PATH"]})
        result = await sandbox.run(["env"], str(tmp_path), {}, 10)
    finally:
        del os.environ["AIRLOCK_TEST_SECRET"]
    assert "do-not-inherit" not in result.stdout


async def test_local_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    script = (
        "import os, signal, subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'])\n"
        f"open({str(pid_file)!r} + '.tmp', 'w').write(str(child.pid))\n"
        f"os.rename({str(pid_file)!r} + '.tmp', {str(pid_file)!r})\n"
        "signal.pause()\n"
    )
    result = await LocalSandbox().run([sys.executable, "-c", script], str(tmp_path), {}, 3)
    assert result.timed_out
    assert result.exit_code is None and result.signal == 9
    assert pid_file.exists(), "the script was killed before it started its child"
    grandchild = int(pid_file.read_text())
    await wait_until(
        lambda: not pid_alive(grandchild), message="the grandchild survived the timeout"
    )


async def test_local_cancel_kills_the_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = (
        f"import os, signal; open({str(pid_file)!r}, 'w').write(str(os.getpid())); signal.pause()"
    )
    task = asyncio.create_task(
        LocalSandbox().run([sys.executable, "-c", script], str(tmp_path), {}, 60)
    )
    await wait_until(lambda: pid_file.exists() and pid_file.read_text(), message="never started")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_local_missing_program_and_output_cap(tmp_path: Path) -> None:
    missing = await LocalSandbox().run(["/nonexistent/prog"], str(tmp_path), {}, 5)
    assert missing.exit_code == 127 and "nonexistent" in missing.stderr
    big = await LocalSandbox().run(
        [sys.executable, "-c", "print('a' * 5000 + 'END')"],
        str(tmp_path),
        {},
        5,
        max_output_bytes=100,
    )
    assert big.stdout_truncated and big.stdout.endswith("END\n") and len(big.stdout) == 100


async def test_daemon_sandbox_runs_through_airlockd(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    async with running_daemon(workspace) as daemon, daemon.client() as client:
        sandbox = DaemonSandbox(client)
        assert isinstance(sandbox, Sandbox)
        result = await sandbox.run(
            [sys.executable, "-c", "import os; print(os.getcwd(), os.environ['GH_TOKEN'])"],
            str(workspace / "sub"),
            {"GH_TOKEN": "airlock-gh-placeholder"},
            10,
        )
        assert isinstance(result, RunResult)
        assert result.exit_code == 0, result.stderr
        assert result.stdout.split() == [str(workspace / "sub"), "airlock-gh-placeholder"]
        slow = await sandbox.run(list(LINGER_ARGV), str(workspace), {}, 1)
        assert slow.timed_out


def test_docker_sandbox_runs_as_non_root_unless_told() -> None:
    """A real engine and a locally built image (`make images`; CI builds it first)."""
    import os

    image = os.environ.get("AIRLOCK_TEST_DOCKER_IMAGE", "airlock-base:bookworm")
    try:
        import docker

        client = docker.from_env()
        client.ping()
        client.images.get(image)
    except Exception as exc:  # no engine running here, or the image was never built
        pytest.skip(
            f"no Docker engine or no {image} image ({type(exc).__name__}; start one with "
            "scripts/dockerd.sh start, then make images): the DockerSandbox check did not run; "
            "it is NOT a pass"
        )

    async def main() -> tuple[RunResult, RunResult]:
        container = client.containers.run(
            image, ["sleep", "60"], detach=True, remove=True, network_mode="none"
        )
        try:
            default = await DockerSandbox(container).run(
                ["sh", "-c", "echo $X $(id -u)"], "/", {"X": "hi"}, 10
            )
            root = await DockerSandbox(container, user="root").run(["id", "-u"], "/", {}, 10)
            return default, root
        finally:
            container.kill()

    default, root = asyncio.run(main())
    assert default.exit_code == 0, default.stderr
    assert default.stdout.split() == ["hi", "65534"], "commands must not run as root by default"
    assert root.exit_code == 0 and root.stdout.strip() == "0"
