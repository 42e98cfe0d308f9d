"""The multiset subtraction: keyed by path, check, code and message, never by line."""

from __future__ import annotations

from pathlib import Path

from airlock.daemon.diagnostics.baseline import new_findings
from airlock.daemon.diagnostics.model import Finding, finding
from airlock.daemon.diagnostics.service import DiagnosticsService
from airlock.daemon.paths import ResolvedPath


def f(line: int, message: str = "m", anchor: str = "", code: str = "c") -> Finding:
    return finding(
        path="a.py",
        line=line,
        column=1,
        severity="error",
        check="syntax",
        code=code,
        message=message,
        anchor=anchor,
    )


def lines(found: list[Finding]) -> list[int]:
    return [x.diagnostic.line for x in found]


def test_everything_is_new_without_a_baseline() -> None:
    assert lines(new_findings([], [f(3), f(1)])) == [1, 3]


def test_moved_findings_are_not_new() -> None:
    assert new_findings([f(3, anchor="x")], [f(10, anchor="x")]) == []


def test_different_message_or_code_is_new() -> None:
    assert lines(new_findings([f(3)], [f(3, message="other")])) == [3]
    assert lines(new_findings([f(3)], [f(3, code="d")])) == [3]


def test_fixed_findings_disappear() -> None:
    assert new_findings([f(1), f(2)], []) == []


def test_surplus_prefers_the_new_line_text() -> None:
    before = [f(2, anchor="return a + ;")]
    after = [f(2, anchor="return a + ;"), f(6, anchor="return b * ;")]
    assert lines(new_findings(before, after)) == [6]
    # Order does not matter, and the old one may have moved.
    after = [f(9, anchor="return b * ;"), f(4, anchor="return a + ;")]
    assert lines(new_findings(before, after)) == [9]


def test_surplus_without_anchors_keeps_the_farthest() -> None:
    before = [f(10)]
    after = [f(11), f(40)]
    assert lines(new_findings(before, after)) == [40]


def test_line_numbers_inside_messages_do_not_break_keys() -> None:
    before = [f(3, message="does not match opening parenthesis '[' on line 2")]
    after = [f(5, message="does not match opening parenthesis '[' on line 4")]
    assert new_findings(before, after) == []


def test_multiplicity_counts() -> None:
    before = [f(1, anchor="a"), f(2, anchor="a")]
    after = [f(1, anchor="a"), f(2, anchor="a"), f(3, anchor="a")]
    assert len(new_findings(before, after)) == 1


async def test_cancelled_baseline_never_fails_the_edit(tmp_path: Path) -> None:
    """tracker.cancel() before finish: the edit still completes, the checks are skipped."""
    (tmp_path / "a.py").write_text("x = 1\n")
    svc = DiagnosticsService(tmp_path)
    try:
        tracker = svc.tracker([ResolvedPath(tmp_path / "a.py", tmp_path, "a.py")])
        await tracker.start()
        tracker.cancel()
        await tracker.before_write()
        (tmp_path / "a.py").write_text("x = (\n")
        found, skipped = await tracker.finish()
        assert found == []
        assert {s.check for s in skipped} == {"git-diff", "whitespace", "syntax", "types"}
        assert all(s.reason == "baseline: cancelled" for s in skipped)
    finally:
        await svc.aclose()


async def test_disabled_tracker_does_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = (\n")
    svc = DiagnosticsService(tmp_path)
    tracker = svc.tracker([ResolvedPath(tmp_path / "a.py", tmp_path, "a.py")], enabled=False)
    await tracker.start()
    await tracker.before_write()
    assert await tracker.finish() == ([], [])
    assert svc.worker.pid is None
