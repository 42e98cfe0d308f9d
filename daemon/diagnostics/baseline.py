"""Only new problems: subtract the before-edit findings from the after-edit ones.

The comparison is a multiset keyed by (path, check, code, message); line
numbers are ignored, so code that merely moved is not reported. When a key
occurs more often after than before, *which* occurrences are new matters for
the line numbers shown: an occurrence whose line text already carried the
same problem before is old; of the rest, those nearest to a surviving old
occurrence are old; whatever remains is what the edit added.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from .model import Finding

Key = tuple[str, str, str, str]
_MAX_PAIRS = 40_000


def _group(findings: Iterable[Finding]) -> dict[Key, list[Finding]]:
    grouped: dict[Key, list[Finding]] = defaultdict(list)
    for f in findings:
        grouped[f.key].append(f)
    return grouped


def new_findings(before: Iterable[Finding], after: Iterable[Finding]) -> list[Finding]:
    """The findings of ``after`` that ``before`` does not account for, in file order."""
    old = _group(before)
    added: list[Finding] = []
    for key, current in _group(after).items():
        previous = list(old.get(key, ()))
        if not previous:
            added.extend(current)
            continue
        if len(previous) >= len(current):
            continue
        added.extend(_surplus(previous, current))
    return sorted(added, key=lambda f: (f.diagnostic.path, f.diagnostic.line, f.diagnostic.column))


def _surplus(previous: list[Finding], current: list[Finding]) -> list[Finding]:
    """``len(current) - len(previous)`` findings of ``current``, the likeliest new ones."""
    unmatched_old = list(previous)
    leftover: list[Finding] = []
    for f in current:  # same line text, same problem: it was there before
        twin = next((o for o in unmatched_old if o.anchor and o.anchor == f.anchor), None)
        if twin is not None:
            unmatched_old.remove(twin)
        else:
            leftover.append(f)
    if not unmatched_old:
        return leftover
    if len(unmatched_old) * len(leftover) > _MAX_PAIRS:  # pathological: keep the last ones
        return sorted(leftover, key=lambda f: f.diagnostic.line)[len(unmatched_old) :]
    # Pair the remaining old ones with the nearest remaining current ones.
    pairs = sorted(
        (abs(o.diagnostic.line - f.diagnostic.line), i, j)
        for i, o in enumerate(unmatched_old)
        for j, f in enumerate(leftover)
    )
    used_old: set[int] = set()
    used_new: set[int] = set()
    for _, i, j in pairs:
        if i in used_old or j in used_new:
            continue
        used_old.add(i)
        used_new.add(j)
        if len(used_old) == len(unmatched_old):
            break
    return [f for j, f in enumerate(leftover) if j not in used_new]
