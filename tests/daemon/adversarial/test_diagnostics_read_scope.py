"""Read-scope ``diagnostics`` runs no program of the workspace (a real airlockd, a read token).

A read token is how a read-only agent is given the daemon; the workspace may
hold a repository or project planted by anyone. Each planted program writes a
marker when run: after every check, no marker may exist. A write token on the
same daemon (no ``--exec-user``) does run the project's own interpreter: the
marker proves the planted programs are real and would have been found.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from airlock.client.daemon import DaemonClient
from airlock.daemon.diagnostics.types import basedpyright_argv
from tests.daemon.adversarial.diag_plant import Markers, plant_git, plant_python, plant_typescript
from tests.fakes.daemon_harness import running_daemon

READ, WRITE = "r-token-0123456789", "w-token-0123456789"


@asynccontextmanager
async def _client(ws: Path, base: Path, token: str) -> AsyncIterator[DaemonClient]:
    """A client holding ``token`` of a daemon over ``ws`` that knows both tokens."""
    tokens = base / "tokens"
    tokens.write_text(f"{READ} read\n{WRITE} write\n")
    tokens.chmod(0o600)
    async with (
        running_daemon(ws, extra_args=["--token-file", str(tokens)]) as daemon,
        daemon.client(token=token) as client,
    ):
        yield client


async def _diagnostics(client: DaemonClient, paths: list[str], checks: list[str]) -> Any:
    return await client.call("diagnostics", {"paths": paths, "checks": checks})


async def test_read_scope_runs_nothing_planted(
    hostile_ws: Path, markers: Markers, open_base: Path
) -> None:
    plant_git(hostile_ws, markers)
    plant_python(hostile_ws, markers)
    plant_typescript(hostile_ws, markers)
    async with _client(hostile_ws, open_base, READ) as client:
        git_out = await _diagnostics(client, ["notes.txt"], ["git-diff"])
        types_out = await _diagnostics(client, ["mod.py", "app.ts"], ["types", "syntax"])
        whole = await _diagnostics(client, ["."], ["git-diff", "whitespace", "syntax", "types"])
    assert markers.ran() == {}, f"read scope ran planted programs: {markers.ran()}"
    # git still judged the change (from the index and a private copy, never the work tree)
    git_found = [(d["path"], d["line"], d["code"]) for d in git_out["diagnostics"]]
    assert git_found == [("notes.txt", 1, "trailing-whitespace")]
    if basedpyright_argv() is not None:  # the type checker ran, without the project's python
        assert any(d["path"] == "mod.py" for d in types_out["diagnostics"])
    reasons = " ".join(s["reason"] for s in types_out["skipped"])
    assert "app.ts" not in reasons or "read scope" in reasons or "typescript" in reasons
    assert whole["checks_run"]


async def test_write_scope_runs_the_projects_python(
    hostile_ws: Path, markers: Markers, open_base: Path
) -> None:
    """Without --exec-user, write scope runs the project's interpreter (as the daemon's user),
    and git still runs nothing from the repository."""
    if basedpyright_argv() is None:
        raise AssertionError("basedpyright is a dev dependency: make .venv/.installed")
    plant_git(hostile_ws, markers)
    plant_python(hostile_ws, markers)
    async with _client(hostile_ws, open_base, WRITE) as client:
        await _diagnostics(client, ["notes.txt", "mod.py"], ["git-diff", "types"])
    ran = markers.ran()
    assert "venv-python" in ran
    assert not any(name.startswith("git-") for name in ran), ran
