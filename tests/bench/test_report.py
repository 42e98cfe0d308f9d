"""``bench/results/latest.json``: a full run replaces it; a run of some benches merges."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import report


@pytest.fixture(autouse=True)
def fresh_state() -> Iterator[None]:
    saved = {k: list(v) if isinstance(v, list) else v for k, v in report._state.items()}
    report._state.update({"bench": None, "tables": [], "figures": []})
    yield
    report._state.update(saved)


def _run(folder: Path, bench: str, value: float, *, merge: bool) -> dict[str, Any]:
    report._state.update({"tables": [], "figures": []})
    report.begin(bench)
    report.figure("speed", value, baseline=2.0, baseline_name="base")
    report.scaling_table("cost", "items", [10, 100], [1.0, 10.0])
    path = report.write_latest(
        {"failed": [], "durations_s": {bench: 1.5}}, folder, ran=[bench], merge=merge
    )
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_a_partial_run_replaces_only_its_own_benches(tmp_path: Path) -> None:
    _run(tmp_path, "bench_a", 1.0, merge=False)
    _run(tmp_path, "bench_b", 3.0, merge=True)
    data = _run(tmp_path, "bench_a", 4.0, merge=True)
    figures = {(f["bench"], f["value"], f["ratio"]) for f in data["figures"]}
    assert figures == {("bench_b", 3.0, 1.5), ("bench_a", 4.0, 2.0)}
    tables = [t["bench"] for t in data["tables"]]
    assert sorted(tables) == ["bench_a", "bench_b"]
    assert data["tables"][0]["growth_exponent"] == 1.0
    assert set(data["runs"]) == {"bench_a", "bench_b"}
    assert data["durations_s"] == {"bench_a": 1.5, "bench_b": 1.5}


def test_a_full_run_starts_the_file_afresh(tmp_path: Path) -> None:
    _run(tmp_path, "bench_a", 1.0, merge=False)
    data = _run(tmp_path, "bench_b", 3.0, merge=False)
    assert {f["bench"] for f in data["figures"]} == {"bench_b"}
    assert set(data["runs"]) == {"bench_b"}
