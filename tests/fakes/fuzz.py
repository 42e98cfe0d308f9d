"""Fuzzing an OpenAPI document against a running service with ``schemathesis`` (bounded).

One run per credential (none: a short pass, every route answers 401; then the
right token: the coverage and fuzzing phases): schemathesis generates
requests for every operation of the document, valid and invalid, and checks
that nothing answers 5xx and that every status, content type and body is the
one the document promises. The run is bounded (``--max-examples`` per
operation, and a timeout) and seeded; the seed is printed (and named on failure), and
``AIRLOCK_FUZZ_SEED`` replays a run.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,"
    "response_schema_conformance"
)
MAX_EXAMPLES = 8
# With --max-time schemathesis repeats fuzzing until the budget is spent; the bound here
# is --max-examples (per operation) and the subprocess timeout.
MAX_TIME_S = 150


def seed() -> int:
    given = os.environ.get("AIRLOCK_FUZZ_SEED")
    return int(given) if given else random.SystemRandom().randrange(1, 2**31)


def run_schemathesis(
    document: dict[str, Any],
    base_url: str,
    workdir: Path,
    *,
    token: str | None,
    label: str,
    extra: tuple[str, ...] = (),
) -> str:
    """Fuzz; return the report. Fails the test (AssertionError naming the seed) on a finding."""
    chosen = seed()
    path = workdir / f"openapi-{label}.json"
    path.write_text(json.dumps(document))
    argv = [
        str(Path(sys.executable).with_name("schemathesis")),
        "run", str(path),
        "--url", base_url,
        "--checks", CHECKS,
        "--max-examples", str(MAX_EXAMPLES),
        "--seed", str(chosen),
        "--workers", "1",
        "--generation-database", "none",
        "--request-timeout", "30",
        "--no-color",
        *extra,
    ]  # fmt: skip
    if token is not None:
        argv += ["--header", f"Authorization: Bearer {token}"]
    else:  # every answer is the same 401: a short fuzzing pass proves it for every route
        argv += ["--phases", "examples,fuzzing", "--max-examples", "4"]
    print(f"schemathesis {label}: seed {chosen} (replay with AIRLOCK_FUZZ_SEED={chosen})")
    started = time.monotonic()
    proc = subprocess.run(
        argv,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=MAX_TIME_S,
        check=False,
        env={
            **os.environ,
            "NO_COLOR": "1",
            "SCHEMATHESIS_HOOKS": "tests.fakes.fuzz_hooks",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        },
    )
    report = proc.stdout + proc.stderr
    print(f"schemathesis {label}: finished in {time.monotonic() - started:.0f}s")
    if token is not None:
        report = report.replace(token, "<token>")
    assert proc.returncode == 0, (
        f"schemathesis {label} (seed {chosen}, AIRLOCK_FUZZ_SEED={chosen} to replay) found "
        f"problems:\n{report[:14000]}"
    )
    return report
