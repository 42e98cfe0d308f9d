"""Turning check results into wire answers: caps, ordering, skip reasons."""

from __future__ import annotations

from collections.abc import Sequence

from ..protocol import Diagnostic, SkippedCheck
from .model import MAX_DIAGNOSTICS, CheckResult, Finding

Results = dict[str, CheckResult]
_MAX_LISTED_PATHS = 5


def listing(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:_MAX_LISTED_PATHS])
    more = len(paths) - _MAX_LISTED_PATHS
    return shown + (f" and {more} more" if more > 0 else "")


def skip(result: CheckResult, reason: str, displays: Sequence[str]) -> None:
    result.skipped.append(f"{reason} ({listing(displays)})" if displays else reason)
    result.skipped_paths.update(displays)


def capped(
    results: Results, checks: Sequence[str], findings: dict[str, list[Finding]]
) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for check in checks:
        ordered = sorted(
            findings.get(check, []),
            key=lambda f: (f.diagnostic.path, f.diagnostic.line, f.diagnostic.column),
        )
        out.extend(f.diagnostic.to_wire() for f in ordered[:MAX_DIAGNOSTICS])
        if len(ordered) > MAX_DIAGNOSTICS:
            results[check].skipped.append(
                f"only the first {MAX_DIAGNOSTICS} of {len(ordered)} {check} diagnostics are shown"
            )
    return out


def skipped_entries(
    results: Results, checks: Sequence[str], *, with_not_applicable: bool
) -> list[SkippedCheck]:
    entries: list[SkippedCheck] = []
    for check in checks:
        result = results[check]
        for reason in dict.fromkeys(result.skipped):
            entries.append(SkippedCheck(check=check, reason=reason))
        if with_not_applicable and not result.ran and not result.skipped:
            what = listing(result.not_applicable) if result.not_applicable else "these paths"
            entries.append(SkippedCheck(check=check, reason=f"not applicable to {what}"))
    return entries
