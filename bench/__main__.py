"""Run every benchmark module (``python -m bench [--small] [name ...]``), each printing its
own tables; everything is also written to ``bench/results/latest.json``. Naming some
benches re-runs only those and replaces only their entries in the file."""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import time
from pathlib import Path

from bench import report


def main(argv: list[str]) -> int:
    if "--small" in argv:
        os.environ["BENCH_SCALE"] = "small"
    wanted = {a for a in argv if not a.startswith("--")}
    here = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    failed: list[str] = []
    durations: dict[str, float] = {}
    for name in names:
        if wanted and name not in wanted and name.removeprefix("bench_") not in wanted:
            continue
        print(f"\n=== {name} ===", flush=True)
        report.begin(name)
        started = time.monotonic()
        try:
            module = importlib.import_module(f"bench.{name}")
            module.main()
        except Exception as exc:  # one broken bench must not hide the others
            failed.append(name)
            print(f"{name} failed: {exc!r}")
        durations[name] = round(time.monotonic() - started, 1)
        print(f"({name}: {durations[name]:.1f}s)")
    path = report.write_latest(
        {"failed": failed, "durations_s": durations}, ran=list(durations), merge=bool(wanted)
    )
    print(f"\nresults: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
