#!/usr/bin/env python3
"""Print the sha256 of pyproject.toml's dependency lists (what the locks are made from).

scripts/lock.sh writes it to requirements/pyproject-deps.sha256; tests/test_packaging.py
recomputes it, so a dependency added to pyproject.toml without `make lock` fails.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def deps_digest(pyproject: Path = REPO / "pyproject.toml") -> str:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    deps = {
        "dependencies": project.get("dependencies", []),
        "optional-dependencies": project.get("optional-dependencies", {}),
        "requires-python": project.get("requires-python", ""),
    }
    return hashlib.sha256(json.dumps(deps, sort_keys=True).encode()).hexdigest()[:16]


if __name__ == "__main__":
    print(deps_digest())
    sys.exit(0)
