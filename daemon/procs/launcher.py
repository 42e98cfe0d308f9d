"""Start search engines as the exec user without paying for a user switch per start.

Switching users per spawn costs either a ``fork`` of the whole daemon
(``subprocess``'s ``user=``: Python gives up ``vfork`` for it) or an extra
``execve`` of ``setpriv`` with its dynamic linking; both were measured at
several milliseconds a start on a loaded 2-CPU machine, and a count search
starts two engines (bench/bench_spawn_paths.py, docs/daemon.md). So one small
process per exec user is started once, as that user (through the same
``setpriv`` path), and starts every engine on request: ``vfork`` in a process
of a few MiB is cheap, and the child is the exec user from its first
instruction, so its ``chdir`` and every ``open`` are the agent's own.

Trust: requests travel over a ``SOCK_SEQPACKET`` socketpair (no path the agent
could connect to); the launcher is non-dumpable (no ptrace, no ``/proc/PID/fd``
for a process of the same user). What it answers is checked as coming from the
exec user's side: a reported pid must belong to the exec user before the
daemon signals its group. A launcher that dies (the agent can kill a process
of its own user) is started again on the next request; one that cannot start
(the interpreter unreadable to the exec user) makes the caller fall back to the
per-spawn switch, and says why once in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import re
import shutil
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from ..identity import ExecUser, spawn_kwargs
from ..rights import as_daemon
from .contain import CHILD_OOM_SCORE_ADJ, set_oom_score_adj
from .group import kill_group

log = logging.getLogger("airlockd.launcher")

# AIRLOCK_ENGINE_LAUNCHER=off starts every engine through the per-spawn switch
# (benchmarks compare both in one run; operators can rule the launcher out).
ENV_SWITCH = "AIRLOCK_ENGINE_LAUNCHER"
_START_TIMEOUT_S = 10.0
_MAX_FDS = 253  # SCM_MAX_FD
# After a launcher failed to start, engines take the per-spawn way this long.
_RETRY_AFTER_S = 60.0
_RECORD = 1 << 16
# Exits reported before their spawn answer was taken up: a handful at most (engines run a few
# at a time); more means a launcher that is not ours any more.
_MAX_EARLY_EXITS = 256
_FD_CWD = re.compile(r"/proc/self/fd/(\d+)")
_SOURCE = Path(__file__).with_name("launcher_main.py")


class LauncherUnavailable(RuntimeError):
    """The launcher could not start or answer; start the program another way."""


class Launched:
    """A program the launcher started: the slice of ``asyncio.subprocess.Process`` the runner uses."""

    def __init__(
        self,
        pid: int,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
        *,
        signalable: bool = True,
    ) -> None:
        self.pid = pid
        self.signalable = signalable
        """Whether ``pid`` was seen running as the exec user: only then is its group ever
        signalled (a pid already gone may be reused by anyone before a kill)."""
        self.stdout: asyncio.StreamReader | None = stdout
        self.stderr: asyncio.StreamReader | None = stderr
        self.returncode: int | None = None
        self._exited = asyncio.get_running_loop().create_future()
        self._transports: list[asyncio.BaseTransport] = []

    def _set_exit(self, status: int) -> None:
        if not self._exited.done():
            self._exited.set_result(status)

    async def wait(self) -> int:
        """The exit code (negative: the signal), once the launcher reaped it and stdout closed."""
        code: int = await asyncio.shield(self._exited)
        self.returncode = code
        self.release()
        return code

    def kill(self) -> None:
        if self.signalable:
            kill_group(self.pid)

    def release(self) -> None:
        """Close the daemon's ends of the pipes (done by ``wait``; the runner calls it always)."""
        for transport in self._transports:
            transport.close()


class Launcher:
    """One running launcher process for one exec user, bound to the running loop."""

    def __init__(self, user: ExecUser, loop: asyncio.AbstractEventLoop) -> None:
        self.user = user
        self.loop = loop
        self._sock: socket.socket | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[int]] = {}
        self._running: dict[int, Launched] = {}
        self._early: dict[int, int] = {}
        self._ready: asyncio.Future[int] | None = None
        self._starting: asyncio.Task[None] | None = None
        self._failed_at: float | None = None

    def usable(self) -> bool:
        """False for a while after the launcher could not start (engines then switch per spawn)."""
        failed = self._failed_at
        return failed is None or self.loop.time() - failed > _RETRY_AFTER_S

    def mark_failed(self, why: str) -> None:
        if self._failed_at is None:
            log.warning(
                "engine launcher for uid %d unavailable (%s); starting engines through a "
                "per-spawn user switch for %g s",
                self.user.uid,
                why,
                _RETRY_AFTER_S,
            )
        self._failed_at = self.loop.time()

    @property
    def alive(self) -> bool:
        return self._sock is not None

    async def ensure(self) -> None:
        if self._sock is not None:
            return
        if self._starting is None or self._starting.done():
            self._starting = asyncio.create_task(self._start())
        await asyncio.shield(self._starting)
        if self._sock is None:
            raise LauncherUnavailable("the launcher did not start")

    async def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with as_daemon():
            source = _SOURCE.read_text()
        argv, switch = as_user([sys.executable, "-I", "-S", "-c", source], self.user)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=theirs.fileno(),
                stdout=asyncio.subprocess.DEVNULL,
                cwd="/",
                # The daemon's session (and so its autogroup: engines are scheduled like the
                # daemon's other work, as when it started them itself; search/runner.py).
                process_group=0,
                **switch,
            )
        except OSError as exc:
            ours.close()
            raise LauncherUnavailable(f"cannot start the launcher: {exc}") from exc
        finally:
            theirs.close()
        with as_daemon():  # its engines inherit it: memory pressure takes them before airlockd
            set_oom_score_adj(CHILD_OOM_SCORE_ADJ, proc.pid)
        ready = self._attach(ours, proc)
        try:
            pid = await asyncio.wait_for(asyncio.shield(ready), _START_TIMEOUT_S)
        except (TimeoutError, LauncherUnavailable) as exc:
            self._lost("did not answer at start")
            raise LauncherUnavailable(f"the launcher did not start: {exc}") from exc
        if pid != proc.pid:
            self._lost(f"answered as pid {pid}, not {proc.pid}")
            raise LauncherUnavailable("the launcher answered with another pid")
        log.info("engine launcher for uid %d started as pid %d", self.user.uid, pid)

    def _attach(
        self, sock: socket.socket, proc: asyncio.subprocess.Process | None
    ) -> asyncio.Future[int]:
        """Talk to the launcher at the other end of ``sock`` (tests play a hostile one here);
        the future is its ``ready`` answer."""
        sock.setblocking(False)
        ready: asyncio.Future[int] = self.loop.create_future()
        self._ready = ready
        self._sock = sock
        self._proc = proc
        self.loop.add_reader(sock.fileno(), self._on_readable)
        return ready

    def _on_readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        while True:
            try:
                data = sock.recv(_RECORD)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._lost("closed its end")
                return
            try:
                message = json.loads(data)
                self._dispatch(message)
            except (ValueError, TypeError, KeyError) as exc:
                self._lost(f"sent a malformed record ({exc})")
                return

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "ready" in message:
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(int(message["ready"]))
        elif "exit" in message:
            pid, status = int(message["exit"]), int(message["status"])
            child = self._running.pop(pid, None)
            if child is None:
                if len(self._early) >= _MAX_EARLY_EXITS:
                    raise ValueError("exits of programs it was not asked to start")
                self._early[pid] = status
            else:
                child._set_exit(status)
        else:
            future = self._pending.pop(int(message["id"]), None)
            if future is None or future.done():
                return
            if "pid" in message:
                future.set_result(int(message["pid"]))
            else:
                future.set_exception(OSError(str(message.get("error", "spawn failed"))))

    def _lost(self, why: str) -> None:
        """The launcher is gone or misbehaved: fail what waits, start afresh next time."""
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(ValueError, OSError):
                self.loop.remove_reader(sock.fileno())
            sock.close()
            log.warning("engine launcher for uid %d %s; restarting on next use", self.user.uid, why)
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(LauncherUnavailable(why))
        for future in self._pending.values():
            if not future.done():
                future.set_exception(LauncherUnavailable(why))
        self._pending.clear()
        for child in self._running.values():
            child.kill()
            child._set_exit(-9)
        self._running.clear()
        self._early.clear()

    def close(self) -> None:
        self._lost("closed by the daemon")

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str] | None,
        pass_fds: Sequence[int],
        new_session: bool,
    ) -> Launched:
        await self.ensure()
        sock = self._sock
        assert sock is not None
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        self._next_id += 1
        rid = self._next_id
        sent = [out_w, err_w]
        by_fd = _FD_CWD.fullmatch(cwd)
        if by_fd is not None:  # the resolver's descriptor: the child enters it, not a name
            sent.append(int(by_fd.group(1)))
        header = {
            "id": rid,
            "argv": list(argv),
            "cwd": cwd,
            "cwd_fd": by_fd is not None,
            "env": dict(env) if env is not None else None,
            "pass": list(pass_fds),
            "session": new_session,
        }
        future: asyncio.Future[int] = self.loop.create_future()
        self._pending[rid] = future
        try:
            try:
                socket.send_fds(sock, [json.dumps(header).encode()], [*sent, *pass_fds])
            except OSError as exc:  # the launcher died and its end is closed
                self._lost(f"could not be reached ({exc})")
                raise LauncherUnavailable(f"the launcher could not be reached: {exc}") from exc
            finally:
                os.close(out_w)
                os.close(err_w)
            pid = await future
        except BaseException:
            self._pending.pop(rid, None)
            os.close(out_r)
            os.close(err_r)
            raise
        owner = self._owner(pid)
        if owner == "foreign":
            os.close(out_r)
            os.close(err_r)
            self._lost(f"reported pid {pid}, which is not the exec user's")
            raise LauncherUnavailable("the launcher reported a foreign pid")
        stdout, out_t = await self._reader(out_r)
        stderr, err_t = await self._reader(err_r)
        child = Launched(pid, stdout, stderr, signalable=owner == "exec user")
        child._transports = [out_t, err_t]
        early = self._early.pop(pid, None)
        if early is not None:
            child._set_exit(early)
        else:
            self._running[pid] = child
        return child

    def _owner(self, pid: int) -> Literal["exec user", "gone", "foreign"]:
        """Who runs ``pid``: the exec user (its group may be signalled), nobody any more
        (exited and reaped already: never signalled, the number may be reused), or anyone
        else (the launcher is lying)."""
        if pid <= 1 or pid == os.getpid():
            return "foreign"
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except FileNotFoundError:
            return "gone"
        except OSError:
            return "foreign"
        return "exec user" if uid == self.user.uid else "foreign"

    async def _reader(self, fd: int) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
        reader = asyncio.StreamReader(limit=1 << 20, loop=self.loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=self.loop)
        transport, _ = await self.loop.connect_read_pipe(lambda: protocol, os.fdopen(fd, "rb", 0))
        return reader, transport


@functools.cache
def _setpriv() -> str | None:
    return shutil.which("setpriv")


def as_user(argv: Sequence[str], user: ExecUser | None) -> tuple[list[str], dict[str, Any]]:
    """``argv`` and spawn arguments that run it as ``user`` (the exec user).

    Through ``setpriv`` (util-linux) when it is installed: ``subprocess`` can then
    ``vfork``, where asking it to switch users itself makes it ``fork`` the whole
    daemon (measured here: 19 ms against 2.5 ms per engine start on a loaded 2-CPU
    machine, twice per count search). ``setpriv`` sets the real, effective and saved
    uid and gid and the groups, so the kernel drops every capability before rg runs.
    Without it, ``subprocess``'s own ``user``/``group``/``extra_groups``.
    """
    if user is None or user.is_current:
        return list(argv), {}
    setpriv = _setpriv()
    if setpriv is None:
        return list(argv), spawn_kwargs(user)
    groups = ",".join(str(g) for g in user.groups)
    return [
        setpriv,
        f"--reuid={user.uid}",
        f"--regid={user.gid}",
        f"--groups={groups}" if groups else "--clear-groups",
        "--",
        *argv,
    ], {}


Pipes = Callable[
    [Sequence[str], str, "Mapping[str, str] | None", Sequence[int], dict[str, Any]],
    Awaitable[asyncio.subprocess.Process],
]


async def spawn_as(
    user: ExecUser | None,
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str] | None,
    pass_fds: Sequence[int],
    new_session: bool,
    pipes: Pipes,
) -> Launched | asyncio.subprocess.Process:
    """Start ``argv`` as ``user`` with stdout/stderr piped back, the cheapest safe way.

    Through the user's launcher when there is a user to switch to; else, or when
    the launcher is off or cannot start, through ``pipes`` (the caller's own
    ``asyncio`` spawn) with ``as_user``'s switch. An ``OSError`` (no such
    program, no such cwd) is raised either way.
    """
    if user is None or user.is_current:
        return await pipes(argv, cwd, env, pass_fds, {})
    # One record carries at most SCM_MAX_FD descriptors (pipes, cwd and ``pass_fds``).
    # Started on the first search, not at start-up: asyncio's thread that waits for the
    # launcher is then born with the exec user's filesystem identity, as every other
    # thread of the serving daemon (rights.py).
    fits = len(pass_fds) + 3 <= _MAX_FDS
    if fits and os.environ.get(ENV_SWITCH, "on").strip().lower() not in ("off", "0", "no"):
        launcher = launcher_for(user)
        # Twice: a launcher that died since the last start (the agent may kill a process
        # of its own user) is seen only when a request fails; the second try starts anew.
        for attempt in range(2):
            if not launcher.usable():
                break
            was_running = launcher.alive
            try:
                return await launcher.spawn(
                    argv, cwd=cwd, env=env, pass_fds=pass_fds, new_session=new_session
                )
            except LauncherUnavailable as exc:
                if not was_running or attempt:
                    launcher.mark_failed(str(exc))
    switched, who = as_user(argv, user)
    return await pipes(switched, cwd, env, pass_fds, who)


_launchers: dict[tuple[int, int, tuple[int, ...]], Launcher] = {}


def launcher_for(user: ExecUser) -> Launcher:
    """The launcher for ``user`` on the running loop (a new one for a new loop)."""
    loop = asyncio.get_running_loop()
    key = (user.uid, user.gid, tuple(user.groups))
    found = _launchers.get(key)
    if found is None or found.loop is not loop:
        if found is not None:  # a loop that ended (tests run several): its launcher goes too
            with contextlib.suppress(RuntimeError):
                found.close()
        found = _launchers[key] = Launcher(user, loop)
    return found
