"""An edit's after-check runs on the bytes it is about to write, while it writes them.

Syntax and whitespace depend on the bytes alone, so checking them before the
write must answer exactly what checking the file afterwards does; a write
that fails must leave nothing of the early check behind; the pipe framing
that carries the bytes must never let one request's content be read as the
next request.
"""

from __future__ import annotations

import contextlib
import random
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.diagnostics.service import DiagnosticsService
from airlock.daemon.diagnostics.worker import Worker
from airlock.daemon.errors import AirlockError
from airlock.daemon.paths import ResolvedPath
from airlock.daemon.protocol import ApplyPatchInput, FilePatchInput, FileWriteInput
from airlock.daemon.workspace import Workspace
from tests.fakes.wait import wait_until

LINES = [
    "def f(x):",
    "    return x",
    "    return x  ",
    "\treturn x",
    "",
    "value = (1,",
    "     2)",
    "broken = [",
    "<<<<<<< HEAD",
    "# note\t",
]


def _strip_ids(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k != "id"}


def test_inline_content_answers_what_the_file_on_disk_would(tmp_path: Path) -> None:
    """Random versions: one worker is told each version's bytes before they reach the disk,
    another reads them from the disk afterwards; the answers are identical."""
    rng = random.Random(1729)
    ahead, disk = Worker(), Worker()
    path = tmp_path / "mod.py"
    path.write_text("x = 1\n")
    req = {"path": str(path), "display": "mod.py", "checks": ["syntax", "whitespace"]}
    for _ in range(60):
        data = ("\n".join(rng.choice(LINES) for _ in range(rng.randint(0, 12))) + "\n").encode()
        early = ahead.handle(req, data)
        path.write_bytes(data)
        assert _strip_ids(early) == _strip_ids(disk.handle(req, path.read_bytes()))
        # The next baseline reads the disk: the version told ahead is the one it finds.
        assert _strip_ids(ahead.handle(req, path.read_bytes())) == _strip_ids(early)


async def test_content_frames_stay_in_step_over_the_real_pipe(
    ws_dir: Path, service: DiagnosticsService
) -> None:
    """Content that looks like request lines is content, and the next request is unaffected."""
    target = ws_dir / "a.txt"
    target.write_text("plain\n")
    tricky = b'{"id": 999, "path": "/etc/passwd", "checks": ["whitespace"]}\ntrailing   \n'
    answer = await service.worker.request(
        {"path": str(target), "display": "a.txt", "checks": ["whitespace"]}, 30.0, tricky
    )
    findings = answer["results"]["whitespace"]["findings"]
    assert [(f["line"], f["code"]) for f in findings] == [(2, "trailing-whitespace")]
    plain = await service.worker.request(
        {"path": str(target), "display": "a.txt", "checks": ["whitespace"]},
        30.0,
        target.read_bytes(),
    )
    assert plain["state"] == "ok"
    assert plain["results"]["whitespace"]["findings"] == []
    # A request without bytes is refused: the worker never opens the path it names.
    bare = await service.worker.request(
        {"path": "/etc/passwd", "display": "passwd", "checks": ["whitespace"]}, 30.0
    )
    assert bare["state"] == "unreadable" and "content_bytes" in bare["detail"]


async def test_a_garbled_frame_ends_the_worker_and_the_next_request_gets_a_new_one(
    ws_dir: Path, service: DiagnosticsService
) -> None:
    (ws_dir / "a.txt").write_text("ok  \n")
    resolved = ResolvedPath(ws_dir / "a.txt", ws_dir, "a.txt")
    first = await service.run([resolved], ["whitespace"])
    assert [d.line for d in first.diagnostics] == [1]
    channel = service.worker._channel
    assert channel is not None
    pid = channel.spawned.pid
    channel.spawned.write(b'{"content_bytes": -5}\n')  # no frame can follow this header
    with contextlib.suppress(AssertionError):
        await wait_until(lambda: not channel.alive, timeout=10)
    assert not channel.alive
    (ws_dir / "a.txt").write_text("fine\nok  \n")  # new bytes: only a worker can answer
    again = await service.run([resolved], ["whitespace"])
    assert [d.line for d in again.diagnostics] == [2]
    assert service.worker.pid not in (None, pid)


@pytest.mark.parametrize("tool", ["file_write", "file_patch", "apply_patch"])
async def test_every_editing_tool_checks_its_new_bytes_ahead(
    untyped_workspace: Workspace, ws_dir: Path, tool: str
) -> None:
    service = untyped_workspace.ctx.diag
    (ws_dir / "m.py").write_text("def f(x):\n    return x\n")
    before = service.checked_ahead
    if tool == "file_write":
        out: Any = await untyped_workspace.file_write(
            FileWriteInput(path="m.py", content="def f(x):\n    return (x  \n")
        )
    elif tool == "file_patch":
        out = await untyped_workspace.file_patch(
            FilePatchInput(path="m.py", old_string="    return x\n", new_string="    return (x  \n")
        )
    else:
        out = await untyped_workspace.apply_patch(
            ApplyPatchInput(
                patch="*** Begin Patch\n*** Update File: m.py\n@@\n-    return x\n"
                "+    return (x  \n*** End Patch\n"
            )
        )
    assert service.checked_ahead == before + 1
    got = sorted((d.check, d.line, d.code) for d in out.diagnostics)
    # What a check of the file as written says (it is all new: the old file was clean).
    resolved = ResolvedPath(ws_dir / "m.py", ws_dir, "m.py")
    after = await service.run([resolved], ["syntax", "whitespace"])
    assert got == sorted((d.check, d.line, d.code) for d in after.diagnostics)
    assert ("whitespace", 2, "trailing-whitespace") in got
    assert any(check == "syntax" for check, _, _ in got)


async def test_a_write_that_fails_leaves_nothing_of_its_early_check(
    untyped_workspace: Workspace, ws_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planned bytes were checked but never written (another process changed the file
    after planning): the edit fails, and the next edit's report is judged against what is
    really on disk, not against the bytes that never landed."""
    import airlock.daemon.apply_patch as engine

    target = ws_dir / "m.txt"
    target.write_text("one\ntwo\n")
    from airlock.daemon.apply_patch.planner import plan_changes as real_plan

    def plan_then_interfere(*args: Any) -> Any:
        planned = real_plan(*args)
        target.write_text("one\ntwo   \n")  # someone else adds trailing whitespace
        return planned

    monkeypatch.setattr(engine, "_plan_changes", plan_then_interfere)
    with pytest.raises(AirlockError) as info:
        await untyped_workspace.apply_patch(
            ApplyPatchInput(
                patch="*** Begin Patch\n*** Update File: m.txt\n@@\n-one\n+uno\n*** End Patch\n"
            )
        )
    assert info.value.code == "stale_write"
    assert target.read_text() == "one\ntwo   \n"
    monkeypatch.setattr(engine, "_plan_changes", real_plan)
    out = await untyped_workspace.apply_patch(
        ApplyPatchInput(
            patch="*** Begin Patch\n*** Update File: m.txt\n@@\n-one\n+uno  \n*** End Patch\n"
        )
    )
    # Only the edit's own problem: line 2's whitespace was there before this edit.
    assert [(d.line, d.code) for d in out.diagnostics] == [(1, "trailing-whitespace")]


async def test_bytes_already_checked_need_no_worker(
    ws_dir: Path, service: DiagnosticsService
) -> None:
    """Edit N's after-check is edit N+1's baseline: the same bytes are answered from memory,
    even with the worker gone; changed bytes go to a (new) worker."""
    target = ws_dir / "a.js"
    target.write_text("let a = ;\n")
    resolved = ResolvedPath(target, ws_dir, "a.js")
    first = await service.run([resolved], ["syntax"])
    channel = service.worker._channel
    assert channel is not None
    channel.kill()
    await channel.reader
    again = await service.run([resolved], ["syntax"])
    assert again.diagnostics == first.diagnostics
    assert service.worker._channel is channel  # nothing was asked of a worker
    target.write_text("let b = ;\n")
    changed = await service.run([resolved], ["syntax"])
    assert [d.line for d in changed.diagnostics] == [1]
    assert service.worker._channel is not channel
