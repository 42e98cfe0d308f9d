"""The worker process (off the event loop, restartable) and the real airlockd."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import pytest

from airlock.daemon.diagnostics.service import DiagnosticsService
from airlock.daemon.paths import ResolvedPath
from tests.fakes.daemon_harness import running_daemon
from tests.fakes.wait import pace, pid_alive, wait_until, wait_until_sync


def big_python(lines: int = 39_000) -> str:
    """About 1 MB of valid Python, then one syntax error on the last line."""
    body = "".join(
        f"def function_{i}(a, b):\n    return [x * {i} for x in range(a) if x % 3] + [b]\n\n"
        for i in range(lines // 3)
    )
    return body + "broken = (1,\n"


def rp(ws: Path, name: str) -> ResolvedPath:
    return ResolvedPath(ws / name, ws, name)


async def test_large_file_does_not_block_the_event_loop(
    ws_dir: Path, service: DiagnosticsService
) -> None:
    text = big_python()
    assert len(text) > 1_000_000
    (ws_dir / "big.py").write_text(text)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await pace(0.005)  # the point: a ticker that needs a free loop
            ticks += 1

    ticking = asyncio.create_task(ticker())
    try:
        out = await service.run([rp(ws_dir, "big.py")], ["syntax"])
    finally:
        ticking.cancel()
    last_line = text.count("\n")
    assert [(d.line, d.code) for d in out.diagnostics] == [(last_line, "python-syntax")]
    # Parsing 1 MB takes far longer than a few 5 ms sleeps; had it run on the
    # loop, the ticker could not have advanced while it did.
    assert ticks >= 5


async def test_worker_restarts_after_it_dies(ws_dir: Path, service: DiagnosticsService) -> None:
    (ws_dir / "a.js").write_text("let a = ;\n")
    first = await service.run([rp(ws_dir, "a.js")], ["syntax"])
    assert [d.line for d in first.diagnostics] == [1]
    pid = service.worker.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    await wait_until(lambda: not pid_alive(pid), message="the killed worker lived on")
    # New bytes (the answer for the old ones is remembered): only a worker can check them.
    (ws_dir / "a.js").write_text("// first\nlet a = ;\n")
    second = await service.run([rp(ws_dir, "a.js")], ["syntax"])
    assert [d.line for d in second.diagnostics] == [2]
    assert service.worker.pid not in (None, pid)


async def test_worker_timeout_is_a_skip_and_recovers(ws_dir: Path) -> None:
    (ws_dir / "big.py").write_text(big_python())
    (ws_dir / "small.py").write_text("x = (\n")
    svc = DiagnosticsService(ws_dir, timeout_s=0.01)
    try:
        out = await svc.run([rp(ws_dir, "big.py")], ["syntax"])
        assert out.diagnostics == []
        assert [s.check for s in out.skipped] == ["syntax"]
        assert out.skipped[0].reason.startswith("timeout")
        svc.timeout_s = 60.0
        again = await svc.run([rp(ws_dir, "small.py")], ["syntax"])
        assert [d.line for d in again.diagnostics] == [1]
    finally:
        await svc.aclose()


async def test_missing_paths_and_directories_never_raise(
    ws_dir: Path, service: DiagnosticsService
) -> None:
    (ws_dir / "sub").mkdir()
    out = await service.run([rp(ws_dir, "gone.py"), rp(ws_dir, "sub")])
    assert out.diagnostics == []
    assert {s.check for s in out.skipped} == {"git-diff", "whitespace", "syntax", "types"}


async def _service_with_worker(ws_dir: Path) -> tuple[DiagnosticsService, int]:
    """A service that has run one syntax check, so its worker is up, and that worker's pid."""
    (ws_dir / "a.py").write_text("x = 1\n")
    svc = DiagnosticsService(ws_dir)
    await svc.run([rp(ws_dir, "a.py")], ["syntax"])
    pid = svc.worker.pid
    assert pid is not None
    return svc, pid


async def test_aclose_stops_the_worker(ws_dir: Path) -> None:
    svc, pid = await _service_with_worker(ws_dir)
    await svc.aclose()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.slow
async def test_daemon_answers_health_while_parsing_1mb(ws_dir: Path) -> None:
    text = big_python()
    (ws_dir / "big.py").write_text(text)
    (ws_dir / "small.py").write_text("x = 1\n")
    async with running_daemon(ws_dir) as daemon, daemon.client() as client:
        # Warm the worker so the measurement is the parse, not the start-up.
        await client.call("diagnostics", {"paths": ["small.py"], "checks": ["syntax"]})
        call = asyncio.create_task(
            client.call("diagnostics", {"paths": ["big.py"], "checks": ["syntax"]})
        )
        answered = 0
        while not call.done():
            await client.health()
            answered += 1
        result = await call
        assert answered >= 3
        assert [(d["line"], d["code"]) for d in result["diagnostics"]] == [
            (text.count("\n"), "python-syntax")
        ]
        # And an edit through the socket reports the new error with its line.
        patched = await client.call(
            "file_patch", {"path": "small.py", "old_string": "x = 1", "new_string": "x = (1,"}
        )
        syntax = [d for d in patched["diagnostics"] if d["check"] == "syntax"]
        assert [(d["path"], d["line"]) for d in syntax] == [("small.py", 1)]


async def test_dropped_service_kills_its_worker(ws_dir: Path) -> None:
    """Workspaces that are never closed (tests, embedders) must not leak workers."""
    import gc

    svc, pid = await _service_with_worker(ws_dir)
    del svc
    gc.collect()
    await wait_until(
        lambda: not pid_alive(pid), timeout=5, message=f"worker {pid} outlived its service"
    )


def test_workers_die_with_their_event_loop(ws_dir: Path) -> None:
    """A service that is never closed nor collected: closing its loop ends its processes."""
    (ws_dir / "a.py").write_text("x: int = 1\n")
    keep: list[DiagnosticsService] = []

    async def use() -> list[int]:
        svc = DiagnosticsService(ws_dir)
        keep.append(svc)  # still referenced: no finaliser can help
        await svc.run([rp(ws_dir, "a.py")], ["syntax", "types"])
        pids = [svc.worker.pid] if svc.worker.pid else []
        pids += list(svc.checkers.pyright._live)
        return pids

    pids = asyncio.run(use())
    assert pids
    # A zombie waiting to be reaped counts as dead.
    with contextlib.suppress(AssertionError):
        wait_until_sync(lambda: not any(pid_alive(p) for p in pids), timeout=5)
    alive = [p for p in pids if pid_alive(p)]
    assert not alive, f"still running after their loop closed: {alive}"


def test_loop_shutdown_right_after_failed_edits_does_not_hang(tmp_path: Path) -> None:
    """Failed edits abandon baselines mid-spawn; closing the loop then must not hang."""
    import threading

    from airlock.daemon.context import DaemonConfig
    from airlock.daemon.errors import AirlockError
    from airlock.daemon.protocol import FilePatchInput
    from airlock.daemon.workspace import Workspace

    ws_dir = tmp_path / "ws"
    ws_dir.mkdir()
    for name in ("a.py", "b.ts", "c.txt"):
        (ws_dir / name).write_text("same\n")

    async def main() -> int:
        ws = Workspace(
            DaemonConfig(workspace=ws_dir, artifacts_dir=tmp_path / "a", state_dir=tmp_path / "s")
        )
        failures = 0
        for name in ("a.py", "b.ts", "c.txt") * 2:
            try:
                await ws.file_patch(FilePatchInput(path=name, old_string="same", new_string="same"))
            except AirlockError:
                failures += 1
        return failures  # no aclose: the loop's shutdown must clean up alone

    outcome: list[int] = []
    runner = threading.Thread(target=lambda: outcome.append(asyncio.run(main())), daemon=True)
    runner.start()
    runner.join(60)
    assert not runner.is_alive(), "the event loop did not shut down"
    assert outcome == [6]
