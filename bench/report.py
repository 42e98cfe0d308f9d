"""Helpers for benchmark tables, and the record ``make bench`` leaves in ``bench/results``.

Every table a bench prints through :func:`table` is also recorded (headers,
rows, and each row as a header -> value map), tagged with the bench that is
running, so benches need no change to appear in ``bench/results/latest.json``.
Benches that want comparable figures call :func:`figure` (a value with its
baseline measured in the same run and the ratio). ``python -m bench`` writes
the file at the end: machine, commit, scale, every table and figure.

Scale: ``BENCH_SCALE=small`` (or ``--small``) runs each scaling table on its
smaller steps (CI, a developer's laptop); the default is the full steps.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).parent / "results"
_state: dict[str, Any] = {"bench": None, "tables": [], "figures": []}


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, title: str = "") -> str:
    """Aligned columns; the table is recorded for ``latest.json`` as well."""
    _state["tables"].append(
        {
            "bench": _state["bench"],
            "title": title,
            "headers": [str(h) for h in headers],
            "rows": [[_plain(c) for c in row] for row in rows],
            "records": [
                {str(h): _plain(c) for h, c in zip(headers, row, strict=False)} for row in rows
            ],
        }
    )
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(cells[0], widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    for row in cells[1:]:
        lines.append(" | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    return "\n".join(lines)


def figure(
    name: str,
    value: float,
    *,
    unit: str = "ms",
    baseline: float | None = None,
    baseline_name: str = "",
    target: str = "",
) -> None:
    """One comparable figure: a measurement, its same-run baseline and their ratio."""
    ratio = value / baseline if baseline else None
    _state["figures"].append(
        {
            "bench": _state["bench"],
            "name": name,
            "value": _plain(value),
            "unit": unit,
            "baseline": _plain(baseline),
            "baseline_name": baseline_name,
            "ratio": _plain(ratio),
            "target": target,
        }
    )


def bench_seconds(default: float) -> float:
    """How long each timed scenario runs: ``BENCH_SECONDS`` when set (CI and
    ``python -m bench`` shorten runs with it), else the bench's own default."""
    return float(os.environ.get("BENCH_SECONDS", default))


def print_last_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], notes: Iterable[str]
) -> None:
    """Print a report's closing table, then the notes on what its numbers do not say."""
    print()
    print(table(headers, rows))
    for note in notes:
        print(note)


def begin(bench: str) -> None:
    """Tag what is recorded from now on with ``bench`` (``python -m bench`` calls it)."""
    _state["bench"] = bench


def small() -> bool:
    """True when the small variant of the scaling tables was asked for."""
    return os.environ.get("BENCH_SCALE", "").lower() in ("small", "ci", "quick")


def steps(full: Sequence[int], small_steps: Sequence[int]) -> list[int]:
    return list(small_steps if small() else full)


def growth_exponent(sizes: Sequence[float], costs: Sequence[float]) -> float:
    """The slope of log(cost) against log(size) (least squares): 1 is linear, 0 constant."""
    pairs = [(math.log(s), math.log(c)) for s, c in zip(sizes, costs, strict=True) if s > 0 < c]
    if len(pairs) < 2:
        return float("nan")
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    var = sum((x - mx) ** 2 for x, _ in pairs)
    return sum((x - mx) * (y - my) for x, y in pairs) / var if var else float("nan")


def scaling_table(
    what: str, unit_name: str, sizes: Sequence[int], costs_ms: Sequence[float], **extra: Any
) -> str:
    """A 10x-step table: size, total cost, cost per unit, and the fitted growth exponent."""
    rows: list[list[object]] = []
    for size, cost in zip(sizes, costs_ms, strict=True):
        rows.append([size, cost, cost * 1000 / size if size else float("nan")])
    exponent = growth_exponent(sizes, costs_ms)
    rendered = table([unit_name, "ms", f"us per {unit_name}"], rows, title=what)
    _state["tables"][-1]["growth_exponent"] = _plain(exponent)
    _state["tables"][-1].update({k: _plain(v) for k, v in extra.items()})
    return f"{what}\n{rendered}\ngrowth exponent (log-log fit): {exponent:.2f}"


def machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in load],
    }


def commit() -> str:
    here = Path(__file__).parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("-dirty" if dirty else "") if head else "unknown"


def results(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "commit": commit(),
        "scale": "small" if small() else "full",
        **(extra or {}),
        "figures": list(_state["figures"]),
        "tables": list(_state["tables"]),
    }


def write_latest(
    extra: dict[str, Any] | None = None,
    folder: Path = RESULTS_DIR,
    *,
    ran: Sequence[str] = (),
    merge: bool = False,
) -> Path:
    """Write ``latest.json``. ``merge`` (a run of some benches only) keeps the other benches'
    figures and tables from the file already there, so one slow bench can be re-run alone;
    ``runs`` says, per bench, which commit, machine load and time its figures come from."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "latest.json"
    current = results(extra)
    run_info = {
        "commit": current["commit"],
        "written_at": current["written_at"],
        "scale": current["scale"],
        "load_average": current["machine"]["load_average"],
    }
    runs: dict[str, Any] = {}
    if merge and path.exists():
        try:
            previous = json.loads(path.read_text())
        except ValueError:
            previous = {}
        mine = set(ran)
        runs = {k: v for k, v in previous.get("runs", {}).items() if k not in mine}
        for key in ("figures", "tables"):
            kept = [x for x in previous.get(key, []) if x.get("bench") not in mine]
            current[key] = kept + current[key]
        for key in ("durations_s",):
            earlier = {k: v for k, v in previous.get(key, {}).items() if k not in mine}
            current[key] = {**earlier, **current.get(key, {})}
        current["failed"] = sorted(
            {*(x for x in previous.get("failed", []) if x not in mine), *current.get("failed", [])}
        )
    runs.update({name: run_info for name in ran})
    current["runs"] = dict(sorted(runs.items()))
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(current, indent=1, default=str) + "\n")
    tmp.replace(path)
    return path


def _plain(value: object) -> object:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, 4)
    if value is None or isinstance(value, (int, str, bool)):
        return value
    return str(value)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)
