"""Where the GitHub shell tool runs commands: the ``Sandbox`` protocol.

One method, ``run(argv, cwd, env, timeout)``; no shell anywhere. Three
implementations:

- :class:`DaemonSandbox`: airlockd's ``exec`` over its socket (production).
- :class:`DockerSandbox`: ``docker exec`` through the docker SDK, for
  containers without airlockd.
- :class:`LocalSandbox`: a local subprocess, for development and tests.

``env`` is merged over the sandbox's own environment (PATH etc. come from the
sandbox), never replacing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .daemon import DaemonClient


@dataclass(frozen=True)
class RunResult:
    """A finished command. ``exit_code`` is None when it was killed by a signal."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    signal: int | None = None
    duration_ms: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    spill_path: str | None = None  # airlockd: where the full output was written


@runtime_checkable
class Sandbox(Protocol):
    async def run(
        self,
        argv: Sequence[str],
        cwd: str,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,  # noqa: ASYNC109 (the contract names it)
        *,
        stdin: str | None = None,
        max_output_bytes: int = 100_000,
    ) -> RunResult:
        """Run ``argv`` in ``cwd`` with ``env`` merged over the sandbox's environment."""
        ...


def _keep_tail(data: bytes, limit: int) -> tuple[str, bool]:
    if len(data) <= limit:
        return data.decode("utf-8", "replace"), False
    return data[-limit:].decode("utf-8", "replace"), True


class LocalSandbox:
    """Runs commands as local subprocesses in their own process group.

    ``base_env`` replaces ``os.environ`` as the starting environment when given
    (tests use it to prove what a command can and cannot see).
    """

    def __init__(self, base_env: Mapping[str, str] | None = None) -> None:
        self._base_env = dict(base_env) if base_env is not None else None

    async def run(
        self,
        argv: Sequence[str],
        cwd: str,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,  # noqa: ASYNC109 (the contract names it)
        *,
        stdin: str | None = None,
        max_output_bytes: int = 100_000,
    ) -> RunResult:
        full_env = dict(self._base_env if self._base_env is not None else os.environ)
        full_env.update(env or {})
        started = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=full_env,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            return RunResult(
                exit_code=127,
                stdout="",
                stderr=f"{argv[0]}: {exc.strerror or exc}\n",
                duration_ms=int((time.monotonic() - started) * 1000),
            )
        timed_out = False
        try:
            out, err = await asyncio.wait_for(
                proc.communicate(stdin.encode() if stdin is not None else None), timeout
            )
        except TimeoutError:
            timed_out = True
            self._kill_group(proc.pid)
            out, err = await proc.communicate()
        except BaseException:
            self._kill_group(proc.pid)
            with contextlib.suppress(Exception):
                await asyncio.shield(proc.wait())
            raise
        rc = proc.returncode
        stdout, out_cut = _keep_tail(out, max_output_bytes)
        stderr, err_cut = _keep_tail(err, max_output_bytes)
        return RunResult(
            exit_code=rc if rc is not None and rc >= 0 else None,
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out,
            signal=-rc if rc is not None and rc < 0 else None,
            duration_ms=int((time.monotonic() - started) * 1000),
            stdout_truncated=out_cut,
            stderr_truncated=err_cut,
        )

    @staticmethod
    def _kill_group(pid: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


class DaemonSandbox:
    """Runs commands through airlockd's ``exec`` tool (its own process group, spill files)."""

    def __init__(self, client: DaemonClient) -> None:
        self.client = client

    async def run(
        self,
        argv: Sequence[str],
        cwd: str,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,  # noqa: ASYNC109 (the contract names it)
        *,
        stdin: str | None = None,
        max_output_bytes: int = 100_000,
    ) -> RunResult:
        from airlock.daemon.protocol import ExecInput

        request = ExecInput(
            argv=list(argv),
            cwd=cwd,
            env=dict(env or {}),
            stdin=stdin,
            timeout_s=max(1, min(3600, int(timeout + 0.999))),
            max_output_bytes=max_output_bytes,
            keep="tail",
        )
        out = await self.client.exec(request)
        return RunResult(
            exit_code=out.exit_code,
            stdout=out.stdout,
            stderr=out.stderr,
            timed_out=out.timed_out,
            signal=out.signal,
            duration_ms=out.duration_ms,
            stdout_truncated=out.stdout_truncated,
            stderr_truncated=out.stderr_truncated,
            spill_path=out.spill_path,
        )


DOCKER_DEFAULT_USER = "65534:65534"
"""Who ``DockerSandbox`` runs commands as unless told otherwise: nobody, not root."""


class DockerSandbox:
    """Runs commands in a running container with the docker SDK's ``exec_run``.

    ``exec_run`` has no timeout and blocks, so it runs in a thread and the
    command is wrapped in coreutils ``timeout`` inside the container (exit 124
    or 137 means it timed out). Cancelling the caller cannot stop the exec
    early; the in-container timeout bounds it.

    Commands run as ``user``, by default :data:`DOCKER_DEFAULT_USER` (uid/gid
    65534, "nobody", numeric so it exists in every image), never as the
    container's root unless asked for explicitly (``user="root"``, or
    ``user="agent"`` for the airlock sandbox image's agent user).
    """

    def __init__(self, container: Any, *, user: str | None = None) -> None:
        self.container = container
        self.user = user or DOCKER_DEFAULT_USER

    @classmethod
    def from_name(cls, name: str, *, user: str | None = None) -> DockerSandbox:
        import docker

        return cls(docker.from_env().containers.get(name), user=user)

    async def run(
        self,
        argv: Sequence[str],
        cwd: str,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,  # noqa: ASYNC109 (the contract names it)
        *,
        stdin: str | None = None,
        max_output_bytes: int = 100_000,
    ) -> RunResult:
        if stdin is not None:
            raise ValueError("DockerSandbox does not support stdin")
        secs = max(1, int(timeout + 0.999))
        wrapped = ["timeout", "-s", "KILL", str(secs), *argv]
        started = time.monotonic()

        def call() -> Any:
            kwargs: dict[str, Any] = {
                "workdir": cwd,
                "environment": dict(env or {}),
                "demux": True,
            }
            kwargs["user"] = self.user
            return self.container.exec_run(wrapped, **kwargs)

        result = await asyncio.to_thread(call)
        out, err = result.output if result.output else (b"", b"")
        stdout, out_cut = _keep_tail(out or b"", max_output_bytes)
        stderr, err_cut = _keep_tail(err or b"", max_output_bytes)
        code = result.exit_code
        return RunResult(
            exit_code=code,
            stdout=stdout,
            stderr=stderr,
            timed_out=code in (124, 137),
            duration_ms=int((time.monotonic() - started) * 1000),
            stdout_truncated=out_cut,
            stderr_truncated=err_cut,
        )
