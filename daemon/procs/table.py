"""Background processes (``process_*`` tools) and the spill store: one table per daemon.

It hangs off :class:`~airlock.daemon.context.ToolContext` (no module state),
so two workspaces in one process each have their own. A process is its root
(the program ``process_start`` ran): it counts against the 32-live limit
while the root runs; when the root exits, whatever it left behind is swept
like an ``exec``'s leftovers, and its output stays readable. ``aclose`` (the
daemon's SIGTERM path) kills every tree; in the real daemon (a subreaper) it
then kills any descendant still left, wherever it came from.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass, field

from ..errors import Conflict, InvalidRequest, NotFound
from ..protocol import (
    MAX_LIVE_PROCESSES,
    PROCESS_RING_BYTES,
    ProcessInfo,
    ProcessKillInput,
    ProcessKillOutput,
    ProcessListOutput,
    ProcessReadInput,
    ProcessReadOutput,
    ProcessResizeInput,
    ProcessResizeOutput,
    ProcessStartInput,
    ProcessStartOutput,
    ProcessWriteInput,
    ProcessWriteOutput,
)
from .contain import Containment
from .pty import DEFAULT_TERM, PtyChannel, PtyPair
from .ring import OutputRing
from .spawn import SpawnSite, plan_spawn, spawn
from .spill import SpillStore
from .tree import (
    TreeGuard,
    ZombieSweeper,
    become_subreaper,
    descendants,
    subtree,
)

_CHUNK = 65536
_KEEP_EXITED = 64
_WRITE_TIMEOUT_S = 10.0
STDIN_QUEUE_BYTES = 1024 * 1024  # input queued for one process that has not read it yet
_KILL_WAIT_S = 2.0
_POLL_S = 0.05
_DRAIN_WAIT_S = 3.0  # _supervise: up to 1 s for the pipes, the sweep, 1 s more
_ZOMBIE_SWEEP_S = 2.0
_TRACK_EVERY = 5  # walk the tree every 5 polls (250 ms)
_SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL, "INT": signal.SIGINT}


@dataclass
class Managed:
    """One background process: its root, its tree, its output."""

    id: str
    name: str | None
    argv: list[str]
    proc: asyncio.subprocess.Process
    guard: TreeGuard
    ring: OutputRing
    started_at: float
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    finished: asyncio.Event = field(default_factory=asyncio.Event)  # root exited, pipes done
    tty: PtyChannel | None = None  # the terminal's master end, with pty: true

    @property
    def running(self) -> bool:
        return self.proc.returncode is None

    @property
    def exit_code(self) -> int | None:
        code = self.proc.returncode
        return code if code is not None and code >= 0 else None

    @property
    def signal(self) -> int | None:
        code = self.proc.returncode
        return -code if code is not None and code < 0 else None

    def notify(self) -> None:
        """Wake every reader waiting for news (new output or exit)."""
        event, self.changed = self.changed, asyncio.Event()
        event.set()


class ProcessTable:
    def __init__(self, spills: SpillStore, ring_bytes: int = PROCESS_RING_BYTES) -> None:
        self.spills = spills
        self.ring_bytes = ring_bytes
        self.subreaper = False
        # Inert until airlockd's serve() calls contain(): an embedding process (tests) keeps
        # its own OOM score and cgroup.
        self.containment = Containment()
        self._procs: dict[str, Managed] = {}
        self._counter = 0
        self._start_lock = asyncio.Lock()
        self._sweeper: asyncio.Task[None] | None = None

    def become_subreaper(self) -> bool:
        """Called by airlockd's ``serve`` only: an embedding process (a test run) must not
        adopt every orphan below it, nor kill all its descendants on ``aclose``."""
        self.subreaper = become_subreaper()
        if self.subreaper and self._sweeper is None:
            self._sweeper = asyncio.create_task(_sweep_zombies())
        return self.subreaper

    def contain(self, tracking: str, max_processes: int) -> Containment:
        """Called by airlockd's ``serve`` only: lower its OOM score, choose cgroup or tree
        tracking (:mod:`.contain`), limit the exec user's processes."""
        self.containment = Containment.setup(tracking, max_processes)
        return self.containment

    # ------------------------------------------------------------ tools

    async def start(self, ctx: SpawnSite, req: ProcessStartInput) -> ProcessStartOutput:
        async with self._start_lock:
            live = sum(1 for p in self._procs.values() if p.running)
            if live >= MAX_LIVE_PROCESSES:
                raise Conflict(
                    f"{live} background processes are already running (the limit is "
                    f"{MAX_LIVE_PROCESSES}); stop one with process_kill (process_list shows "
                    "them) and try again",
                    {"running": live, "limit": MAX_LIVE_PROCESSES},
                )
            self._counter += 1
            pid_id = f"p{self._counter}"
            plan = plan_spawn(ctx, req.argv, req.cwd, req.env, req.granted_paths, f"proc-{pid_id}")
            pair = None
            if req.pty:
                if "TERM" not in req.env:
                    plan.env["TERM"] = DEFAULT_TERM
                pair = PtyPair(req.cols, req.rows, ctx.roots.new_owner)
            cell = self.containment.cell(plan.tree_id)
            try:
                proc = await spawn(ctx, plan, stdin=True, cell=cell, tty=pair)
            except BaseException:
                cell.close()
                if pair is not None:
                    pair.close()
                raise
            entry = Managed(
                id=pid_id,
                name=req.name,
                argv=list(req.argv),
                proc=proc,
                guard=TreeGuard(proc.pid, plan.tree_id, cell),
                ring=OutputRing(self.ring_bytes),
                started_at=time.time(),
            )
            if pair is not None:
                pair.close_slave()
                entry.tty = PtyChannel(pair.master, lambda data: _record(entry, data))
            self._procs[pid_id] = entry
            self._forget_old()
        if req.stdin and entry.tty is not None:
            entry.tty.write(req.stdin.encode(), pid_id)
        elif req.stdin:
            assert proc.stdin is not None
            proc.stdin.write(req.stdin.encode())
        entry.tasks.append(asyncio.create_task(self._supervise(entry)))
        return ProcessStartOutput(id=pid_id, pid=proc.pid)

    async def read(self, req: ProcessReadInput) -> ProcessReadOutput:
        entry = self._get(req.id)
        if req.offset >= entry.ring.end and req.wait_ms > 0 and not entry.finished.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(entry.changed.wait(), req.wait_ms / 1000)
        # Until the pipes are drained, the process still counts as running here: a
        # reader that stops at ``running: false`` must have been offered every byte.
        # An exited process drains within _supervise's bounded clean-up, so wait for it.
        if not entry.running and not entry.finished.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(entry.finished.wait(), _DRAIN_WAIT_S)
        done = entry.finished.is_set()
        part = entry.ring.read(req.offset, req.max_bytes, complete=done)
        return ProcessReadOutput(
            stdout=part.stdout,
            stderr=part.stderr,
            next_offset=part.next_offset,
            running=not done,
            exit_code=entry.exit_code if done else None,
            signal=entry.signal if done else None,
            dropped=part.dropped,
        )

    async def write(self, req: ProcessWriteInput) -> ProcessWriteOutput:
        """Queue ``data`` for the process's stdin, never more than :data:`STDIN_QUEUE_BYTES`.

        Data that fits beside what is already waiting is queued and the call returns at
        once (the pipe takes it as the process reads). When earlier input still waits
        unread and this write does not fit, the answer is ``conflict`` at once: the daemon
        never holds more than the bound for a process that does not read. A single write
        larger than the bound goes in slices, each waiting (up to ``_WRITE_TIMEOUT_S``)
        for the previous to be read.
        """
        entry = self._get(req.id)
        if entry.tty is not None:
            if not entry.running:
                raise InvalidRequest(
                    f"{req.id} has exited; nothing reads its terminal", {"id": req.id}
                )
            # A terminal has no "close stdin": eof sends its EOF character (Ctrl-D).
            data = req.data.encode() + (b"\x04" if req.eof else b"")
            written = entry.tty.write(data, req.id)
            return ProcessWriteOutput(id=req.id, written=written, stdin_open=True)
        stdin = entry.proc.stdin
        if stdin is None or stdin.is_closing():
            raise InvalidRequest(
                f"stdin of {req.id} is closed (eof was sent or the process exited); start a "
                "new process to send more input",
                {"id": req.id},
            )
        if not entry.running:
            raise InvalidRequest(f"{req.id} has exited; nothing reads its stdin", {"id": req.id})
        data = req.data.encode()
        transport = stdin.transport
        # Pause writing whenever anything is buffered, so drain() means "all of it was read".
        transport.set_write_buffer_limits(high=0)
        waiting = transport.get_write_buffer_size()
        if waiting and waiting + len(data) > STDIN_QUEUE_BYTES:
            raise _queue_full(req.id, waiting, 0, len(data))
        written = 0
        try:
            while written < len(data):
                piece = data[written : written + STDIN_QUEUE_BYTES]
                if transport.get_write_buffer_size() + len(piece) > STDIN_QUEUE_BYTES:
                    try:
                        await asyncio.wait_for(stdin.drain(), _WRITE_TIMEOUT_S)
                    except TimeoutError:
                        raise _queue_full(
                            req.id, transport.get_write_buffer_size(), written, len(data)
                        ) from None
                stdin.write(piece)
                written += len(piece)
            if req.eof:
                stdin.close()
            elif not transport.get_write_buffer_size():
                await stdin.drain()  # surfaces a pipe the process already closed
        except (BrokenPipeError, ConnectionResetError):
            raise InvalidRequest(
                f"{req.id} closed its stdin; it reads no more input", {"id": req.id}
            ) from None
        return ProcessWriteOutput(id=req.id, written=written, stdin_open=not stdin.is_closing())

    async def resize(self, req: ProcessResizeInput) -> ProcessResizeOutput:
        entry = self._get(req.id)
        if entry.tty is None:
            raise InvalidRequest(
                f"{req.id} has no terminal to resize; start it with pty: true",
                {"id": req.id},
            )
        running = entry.running and entry.tty.fd >= 0
        if running:
            entry.tty.resize(req.cols, req.rows)
        return ProcessResizeOutput(id=req.id, cols=req.cols, rows=req.rows, running=running)

    async def kill(self, req: ProcessKillInput) -> ProcessKillOutput:
        entry = self._get(req.id)
        sig = _SIGNALS[req.signal]
        if sig == signal.SIGKILL:
            await asyncio.to_thread(entry.guard.kill_all, (entry.proc.pid,))
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(entry.proc.pid, sig)
            await asyncio.to_thread(entry.guard.signal_all, sig)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_wait_returncode(entry.proc), _KILL_WAIT_S)
        return ProcessKillOutput(
            id=entry.id,
            pid=entry.proc.pid,
            signal=req.signal,
            running=entry.running,
            exit_code=entry.exit_code,
        )

    def list(self) -> ProcessListOutput:
        return ProcessListOutput(
            processes=[
                ProcessInfo(
                    id=p.id,
                    pid=p.proc.pid,
                    name=p.name,
                    argv=p.argv,
                    running=p.running,
                    exit_code=p.exit_code,
                    signal=p.signal,
                    started_at=p.started_at,
                    output_bytes=p.ring.end,
                    pty=p.tty is not None,
                )
                for p in self._procs.values()
            ]
        )

    # ------------------------------------------------------------ lifecycle

    async def aclose(self) -> None:
        """Kill every background process and its tree (the daemon is stopping)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
        entries = list(self._procs.values())
        for entry in entries:
            await asyncio.to_thread(entry.guard.kill_all, (entry.proc.pid,))
        for entry in entries:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_wait_returncode(entry.proc), _KILL_WAIT_S)
            for task in entry.tasks:
                task.cancel()
            await asyncio.gather(*entry.tasks, return_exceptions=True)
        if self.subreaper:
            await asyncio.to_thread(kill_all_descendants)
        self.containment.close()

    async def _supervise(self, entry: Managed) -> None:
        """Pump output into the ring, track the tree, and sweep leftovers when the root exits."""
        pumps = [
            asyncio.create_task(self._pump(entry, entry.proc.stdout, "stdout")),
            asyncio.create_task(self._pump(entry, entry.proc.stderr, "stderr")),
        ]
        if entry.tty is not None:
            pumps.append(asyncio.create_task(_until_eof(entry.tty)))
        try:
            polls = 0
            while entry.proc.returncode is None:
                if polls % _TRACK_EVERY == 0:
                    await asyncio.to_thread(entry.guard.track)
                polls += 1
                await asyncio.sleep(_POLL_S)
            entry.notify()
            _done, pending = await asyncio.wait(pumps, timeout=1.0)
            await asyncio.to_thread(entry.guard.kill_all, (entry.proc.pid,))
            if entry.guard.cell is not None:
                entry.guard.cell.close()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        finally:
            for task in pumps:
                task.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            if entry.proc.stdin is not None:
                with contextlib.suppress(Exception):
                    entry.proc.stdin.close()
            if entry.tty is not None:
                entry.tty.close()
            entry.finished.set()
            entry.notify()

    async def _pump(self, entry: Managed, reader: asyncio.StreamReader | None, name: str) -> None:
        if reader is None:
            return
        while chunk := await reader.read(_CHUNK):
            entry.ring.append(name, chunk)
            entry.notify()

    def _get(self, pid_id: str) -> Managed:
        entry = self._procs.get(pid_id)
        if entry is None:
            raise NotFound(
                f"there is no background process {pid_id!r}; process_list shows the ids",
                {"id": pid_id},
            )
        return entry

    def _forget_old(self) -> None:
        exited = [p for p in self._procs.values() if p.finished.is_set()]
        for entry in exited[: max(0, len(exited) - _KEEP_EXITED)]:
            del self._procs[entry.id]


def _queue_full(pid_id: str, waiting: int, written: int, total: int) -> Conflict:
    took = f"it took {written} of this write's {total} bytes; " if written else ""
    return Conflict(
        f"{pid_id} has {waiting} bytes of earlier input it has not read (stdin holds at most "
        f"{STDIN_QUEUE_BYTES} bytes); {took}let it read (process_read shows what it does), "
        "send less, or kill it",
        {"id": pid_id, "queued": waiting, "limit": STDIN_QUEUE_BYTES, "written": written},
    )


async def _until_eof(tty: PtyChannel) -> None:
    await tty.eof.wait()


def _record(entry: Managed, data: bytes) -> None:
    """A terminal's output: one stream, ``stdout``, in the same ring."""
    entry.ring.append("stdout", data)
    entry.notify()


async def _sweep_zombies() -> None:
    sweeper = ZombieSweeper()
    while True:
        await asyncio.sleep(_ZOMBIE_SWEEP_S)
        await asyncio.to_thread(sweeper.sweep)


async def _wait_returncode(proc: asyncio.subprocess.Process) -> None:
    """Until the process has exited, even while a grandchild holds its pipes open.

    ``Process.wait()`` also waits for the pipes to close; the return code is
    known as soon as the process exits, so poll it (no waiter piles up).
    """
    while proc.returncode is None:  # noqa: ASYNC110 (no event to wait on: see above)
        await asyncio.sleep(_POLL_S)


def kill_all_descendants() -> None:
    """SIGKILL every descendant of this process (the daemon is stopping; nothing may stay)."""
    me = os.getpid()
    for _ in range(10):
        snap = subtree(me)
        left = descendants(snap, [me]) - {me}
        left = {pid for pid in left if snap[pid].state not in ("Z", "X")}
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    # Reap the adopted; our own children's statuses belong to whoever spawned them.
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, _status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
