"""The audit log: sampled refusals, reopen after rotation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airlock.proxy.audit import AuditLog


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x]


def test_unauthenticated_refusals_are_sampled_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    audit = AuditLog(path, interval_s=3600, sample_per_minute=3)
    for _ in range(50):
        audit.write("refusal", reason="proxy_auth_required", status=407)
    for _ in range(4):
        audit.write("refusal", reason="host_not_allowed", status=403)  # never sampled
    audit.close()
    lines = _lines(path)
    assert (
        sum(
            1 for e in lines if e.get("reason") == "proxy_auth_required" and e["event"] == "refusal"
        )
        == 3
    )
    assert sum(1 for e in lines if e.get("reason") == "host_not_allowed") == 4
    (summary,) = [e for e in lines if e["event"] == "refusals_suppressed"]
    assert summary == {**summary, "reason": "proxy_auth_required", "count": 47}


def test_reopen_writes_to_a_fresh_file_at_the_same_path(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    audit = AuditLog(path, interval_s=3600)
    audit.write("one")
    audit._drain()
    path.rename(tmp_path / "audit.log.1")
    audit.reopen()
    audit.write("two")
    audit.close()
    assert [e["event"] for e in _lines(tmp_path / "audit.log.1")] == ["one"]
    assert [e["event"] for e in _lines(path)] == ["two"]
    assert (path.stat().st_mode & 0o777) == 0o600
