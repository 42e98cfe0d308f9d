"""Read-scope type checks cannot read for the agent what the agent cannot read itself.

The daemon runs as root; the agent runs as the exec user. The agent plants a
module in the workspace that is a symlink to a root-only file outside it, and
a file that imports it and misuses its value, then asks ``diagnostics`` (read
scope) for types. A checker running as root would resolve the import, read the
secret and quote its literal type in the message. It must run as the exec user
(who gets "permission denied" and nothing else), so the secret never appears.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airlock.daemon.diagnostics.service import DiagnosticsService
from airlock.daemon.diagnostics.types import basedpyright_argv
from airlock.daemon.identity import ExecUser
from airlock.daemon.paths import ResolvedPath

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")

SECRET = "zq-deputy-7319"


async def test_read_scope_types_never_read_root_only_files(tmp_path: Path) -> None:
    assert basedpyright_argv(), "basedpyright is a dev dependency"
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "secrets_mod.py").write_text(f'TOKEN = "{SECRET}"\n')
    (private / "secrets_mod.py").chmod(0o600)
    ws = tmp_path / "ws"
    ws.mkdir()
    ws.chmod(0o777)
    (ws / "secrets_mod.py").symlink_to(private / "secrets_mod.py")
    (ws / "use.py").write_text("from secrets_mod import TOKEN\n\nvalue: int = TOKEN\n")
    svc = DiagnosticsService(ws, timeout_s=120.0, exec_user=ExecUser.parse("nobody"))
    try:
        out = await svc.run([ResolvedPath(ws / "use.py", ws, "use.py")], ["types"], scope="read")
    finally:
        await svc.aclose()
    text = out.model_dump_json()
    assert SECRET not in text, text
    # Not vacuous: the type check was attempted (as root it would have leaked above). As
    # nobody it either ran and could not read the module, or could not start or read the
    # workspace at all (an interpreter under /root, a private temp dir) and says so.
    assert out.checks_run == ["types"] or any(s.check == "types" for s in out.skipped), out
