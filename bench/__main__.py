"""Run every benchmark module (``python -m bench [name ...]``), each printing its own table."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    wanted = set(argv)
    here = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    failed = 0
    for name in names:
        if wanted and name not in wanted and name.removeprefix("bench_") not in wanted:
            continue
        print(f"\n=== {name} ===", flush=True)
        started = time.monotonic()
        try:
            module = importlib.import_module(f"bench.{name}")
            module.main()
        except Exception as exc:  # one broken bench must not hide the others
            failed += 1
            print(f"{name} failed: {exc!r}")
        print(f"({name}: {time.monotonic() - started:.1f}s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
