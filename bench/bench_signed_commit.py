"""airlock-signed-commit against a plain ``git commit && git push``, and the cost
of one PR-watch poll's pure part.

Both commit paths run in the same run against the same local GitHub
(tests/fakes/github.py, direct, no proxy) with the same staged change, so the
ratio is the price of a verified commit: one Python start, two REST lookups,
one GraphQL mutation carrying base64 contents, one fetch and a soft reset,
against git's own pack push. The second table times ``snapshot`` + ``advance``
for a PR with many checks and reviews against just ``json.loads`` of the same
REST payloads (the floor any poller pays).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airlock.client.prwatch import advance, initial_state, snapshot
from bench.report import percentile, table
from tests.fakes.github import FakeGitHub

REPO = "acme/bench"
ITERATIONS = 8
IDENTITY = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


async def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed: {err.decode(errors='replace')}")
    return out.decode()


def _stage_files(clone: Path, kind: str, i: int) -> list[str]:
    if kind == "1 file, 1 KiB":
        (clone / "small.txt").write_text(f"{i}\n" + "x" * 1024)
        return ["small.txt"]
    if kind == "20 files, 10 KiB each":
        names = []
        for n in range(20):
            (clone / f"f{n:02d}.txt").write_text(f"{i}-{n}\n" + "y" * 10240)
            names.append(f"f{n:02d}.txt")
        return names
    (clone / "big.bin").write_bytes(os.urandom(2_400_000))
    return ["big.bin"]


async def _commit_bench(tmp: Path) -> list[list[object]]:
    rows: list[list[object]] = []
    async with FakeGitHub(tmp / "gh", org="acme") as gh:
        await gh.create_repo(REPO)
        token = gh.issue_token([REPO])
        home = tmp / "home"
        home.mkdir()
        extraheader = (
            "Authorization: Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()
        )
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            **IDENTITY,
            "GH_TOKEN": token,
            "GITHUB_API_URL": gh.api_url,
            "GH_HOST": f"127.0.0.1:{gh.git_port}",
            "SSL_CERT_FILE": str(gh.ca_path),
            "GIT_SSL_CAINFO": str(gh.ca_path),
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": f"http.https://127.0.0.1:{gh.git_port}/.extraheader",
            "GIT_CONFIG_VALUE_0": extraheader,
        }
        clone = tmp / "clone"
        await _run(["git", "clone", "-q", str(gh.repo_path(REPO)), str(clone)], tmp, env)
        origin = f"https://127.0.0.1:{gh.git_port}/{REPO}.git"
        await _run(["git", "remote", "set-url", "origin", origin], clone, env)
        counter = 0
        for kind in ("1 file, 1 KiB", "20 files, 10 KiB each", "one 2.4 MB binary"):
            timings: dict[str, list[float]] = {"push": [], "signed": []}
            for _ in range(ITERATIONS):
                for method in ("push", "signed"):
                    counter += 1
                    names = _stage_files(clone, kind, counter)
                    await _run(["git", "add", *names], clone, env)
                    started = time.perf_counter()
                    if method == "push":
                        await _run(["git", "commit", "-q", "-m", f"c{counter}"], clone, env)
                        await _run(["git", "push", "-q", "origin", "HEAD:main"], clone, env)
                    else:
                        await _run(
                            [sys.executable, "-m", "airlock.daemon.signed_commit",
                             "--repo", REPO, "--branch", "main", "-m", f"c{counter}"],
                            clone, env,
                        )  # fmt: skip
                    timings[method].append((time.perf_counter() - started) * 1000)
            push50, signed50 = percentile(timings["push"], 50), percentile(timings["signed"], 50)
            rows.append(
                [
                    kind,
                    push50,
                    signed50,
                    percentile(timings["signed"], 90),
                    f"{signed50 / push50:.2f}x",
                ]
            )
    return rows


def _pr_payloads(checks: int, reviews: int) -> tuple[str, str, str]:
    head = "a" * 40
    pr = {
        "number": 1,
        "state": "open",
        "head": {"sha": head, "ref": "f"},
        "base": {"repo": {"full_name": "o/r"}},
        "user": {"login": "alice"},
    }
    runs = {
        "total_count": checks,
        "check_runs": [
            {"id": i, "name": f"check-{i}", "status": "completed", "conclusion": "success",
             "head_sha": head, "started_at": "2026-01-01T00:00:00Z"}
            for i in range(checks)
        ],
    }  # fmt: skip
    revs = [
        {"id": i, "user": {"login": "alice" if i % 2 else "bob"}, "state": "COMMENTED",
         "commit_id": head, "submitted_at": f"2026-01-01T00:00:{i % 60:02d}Z"}
        for i in range(reviews)
    ]  # fmt: skip
    return json.dumps(pr), json.dumps(runs), json.dumps(revs)


def _time_us(fn: Callable[[], Any], n: int) -> float:
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1e6)
    return percentile(samples, 50)


def _parse_only(pr_s: str, runs_s: str, revs_s: str) -> None:
    json.loads(pr_s), json.loads(runs_s), json.loads(revs_s)


def _parse_and_fold(pr_s: str, runs_s: str, revs_s: str) -> None:
    snap = snapshot(json.loads(pr_s), check_runs=json.loads(runs_s), reviews=json.loads(revs_s))
    advance(initial_state(), snap)


def _poll_bench() -> list[list[object]]:
    rows: list[list[object]] = []
    for checks, reviews in ((5, 2), (50, 20), (300, 100)):
        pr_s, runs_s, revs_s = _pr_payloads(checks, reviews)

        parse_only = functools.partial(_parse_only, pr_s, runs_s, revs_s)
        parse_and_fold = functools.partial(_parse_and_fold, pr_s, runs_s, revs_s)
        base = _time_us(parse_only, 300)
        full = _time_us(parse_and_fold, 300)
        rows.append([f"{checks} checks, {reviews} reviews", base, full, f"{full / base:.2f}x"])
    return rows


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="al-bench-sc-") as tmp:
        commit_rows = asyncio.run(_commit_bench(Path(tmp)))
    print(f"verified commit vs git commit+push, local GitHub, {ITERATIONS} runs each (ms)")
    print(table(["change", "push p50", "signed p50", "signed p90", "signed/push"], commit_rows))
    print()
    print("one PR-watch poll, pure part (µs, p50 of 300)")
    print(table(["PR", "json.loads only", "+ snapshot + advance", "ratio"], _poll_bench()))


if __name__ == "__main__":
    main()
