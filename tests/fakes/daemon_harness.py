"""Start the real ``airlockd`` as a subprocess for tests.

Usage::

    async with running_daemon(tmp_path) as daemon:
        async with daemon.client() as client:
            await client.call("file_read", {"path": "a.txt"})

The socket lives in a short /tmp directory (Unix socket paths are limited to
107 bytes). ``extra_args`` are appended to the command line (``--token-file``,
``--extra-root``...). The process is terminated (then killed) on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from airlock.client.daemon import DaemonClient
from tests.fakes.checkout import in_view, process_view


@dataclass
class RunningDaemon:
    workspace: Path
    socket: Path
    base_dir: Path
    artifacts_dir: Path
    state_dir: Path
    process: asyncio.subprocess.Process
    log_path: Path

    def client(self, token: str | None = None) -> DaemonClient:
        return DaemonClient(socket=str(self.socket), token=token)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


async def wait_for_socket(
    socket: Path, process: asyncio.subprocess.Process, timeout: float = 20.0
) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if process.returncode is not None:
            raise RuntimeError(f"airlockd exited with {process.returncode} before serving")
        if socket.exists():
            try:
                conn = aiohttp.UnixConnector(path=str(socket))
                async with (
                    aiohttp.ClientSession(connector=conn) as http,
                    http.get("http://airlockd/v1/health") as resp,
                ):
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
        await asyncio.sleep(0.05)
    raise TimeoutError(f"airlockd did not answer on {socket} within {timeout}s")


def airlockd_command(interpreter: str | None = None) -> list[str]:
    """airlockd as its exec user can see it: the venv's Python through the shared view of
    the checkout (tests/fakes/checkout.py), so programs beside it (rg) are reachable."""
    python = interpreter or str(in_view(process_view(), Path(sys.executable)))
    return [python, "-m", "airlock.daemon.cli"]


@contextlib.asynccontextmanager
async def running_daemon(
    workspace: Path,
    *,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
    command_prefix: Sequence[str] = (),
    interpreter: str | None = None,
) -> AsyncIterator[RunningDaemon]:
    """``interpreter``: the venv's Python as the daemon's user sees it (tests/fakes/checkout.py)."""
    own_base = base_dir is None
    base = base_dir or Path(tempfile.mkdtemp(prefix="al-d-"))
    socket = base / "d.sock"
    log_path = base / "airlockd.log"
    argv = [
        *command_prefix,
        *airlockd_command(interpreter),
        "--workspace",
        str(workspace),
        "--socket",
        str(socket),
        *extra_args,
    ]
    with open(log_path, "ab") as log:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdout=log,
            stderr=log,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    daemon = RunningDaemon(
        workspace=workspace,
        socket=socket,
        base_dir=base,
        artifacts_dir=base / "artifacts",
        state_dir=base / "state",
        process=process,
        log_path=log_path,
    )
    try:
        await wait_for_socket(socket, process)
        yield daemon
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), timeout=10)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
        if own_base:
            shutil.rmtree(base, ignore_errors=True)


async def sigkill_during(daemon: RunningDaemon, work: Awaitable[None], after_s: float) -> None:
    """Run ``work`` against ``daemon`` and SIGKILL the daemon's group ``after_s`` in.

    The crash tests' step: the delay is the point (a jittered kill time), not a
    stand-in for a condition. ``work`` is cancelled once the daemon is gone.
    """
    worker = asyncio.ensure_future(work)
    await asyncio.sleep(after_s)
    os.killpg(daemon.process.pid, signal.SIGKILL)
    await daemon.process.wait()
    worker.cancel()
    with contextlib.suppress(BaseException):
        await worker


@contextlib.asynccontextmanager
async def daemon_in(base: Path, *, tokens: bool = False) -> AsyncIterator[RunningDaemon]:
    """A daemon over a fresh ``base/ws``, the module-scoped fixture of several test files.

    With ``tokens`` it requires a token: ``w-token`` may write, ``r-token`` only read.
    """
    workspace = base / "ws"
    workspace.mkdir()
    extra: list[str] = []
    if tokens:
        token_file = base / "tokens"
        token_file.write_text("w-token write\nr-token read\n")
        extra = ["--token-file", str(token_file)]
    async with running_daemon(workspace, extra_args=extra) as d:
        yield d


async def airlockd_exit(*args: str, timeout_s: float = 60) -> tuple[int, str]:
    """Run ``airlockd ARGS`` to its exit (a start-up refusal): the exit code and stderr.

    Killed if it is still running after ``timeout_s`` (a daemon that did not refuse).
    """
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.daemon.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        _out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, err.decode()
