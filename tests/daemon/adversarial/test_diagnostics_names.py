"""File names that are not UTF-8 under a ``diagnostics`` directory (a real airlockd).

JSON cannot carry such a name; the answer must still be a normal answer (the
other files checked, a skip entry saying what to rename), never ``internal``.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.fakes.daemon_harness import running_daemon


async def test_non_utf8_names_are_skipped_with_a_reason(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "ok.py").write_text("x = (\n")
    with open(os.path.join(os.fsencode(ws / "src"), b"bad\xff.py"), "wb") as handle:
        handle.write(b"y = (\n")
    os.mkdir(os.path.join(os.fsencode(ws / "src"), b"dir\xfe"))
    async with running_daemon(ws) as daemon, daemon.client() as client:
        out = await client.call("diagnostics", {"paths": ["src"], "checks": ["syntax"]})
    assert [d["path"] for d in out["diagnostics"]] == ["src/ok.py"]
    reasons = [s["reason"] for s in out["skipped"]]
    assert any("not UTF-8" in r and "2 entries" in r for r in reasons), reasons
