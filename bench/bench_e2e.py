"""Deployment-level figures: session throughput of the proxy tier, and the memory of
one idle airlockd.

Session cycle (what one short sandbox command costs the proxy tier): create a
session, install one lease, send one HTTPS request through the proxy with the
placeholder (swapped upstream, verified by the upstream's echo), delete the
session. Each cycle opens a fresh proxy connection, as a new sandbox would.
Scenarios, 8 concurrent orchestrator workers, local TLS upstream in its own
process:

  (a) 1 replica, memory store          (reference: what Redis costs)
  (b) 1 replica, Redis store           (baseline of the ratios)
  (c) 2 replicas, Redis store          (control calls on one replica, traffic on
                                        the other: every cycle crosses the store)

Each scenario runs in several short rounds, alternating with the others, and
reports the median rate (the machine is shared, so its load drifts).

Memory: RSS and PSS of an idle airlockd right after start and after 200 tool
calls, against a bare Python interpreter measured the same way.

Run alone: ``python -m bench.bench_e2e [--seconds N]``. Numbers depend on the
machine (2 shared cores here: the load generator competes with the replicas).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from bench.report import bench_seconds, percentile, print_last_table, table
from bench.sampling import LoadTally, warm_then_measure
from tests.fakes.net import free_port as _free_port
from tests.fakes.net import wait_port as _wait_port

WORKERS = 8
REAL = "ghs_bench_e2e_real_token_" + "y" * 16


@dataclass
class Result:
    name: str
    sessions_per_s: float
    p50_ms: float
    p99_ms: float
    errors: int
    phases_p50_ms: dict[str, float]


PHASES = ("create", "lease", "request", "delete")


def _serve_upstream(cert: str, key: str, port: int) -> None:
    """Answers 200 only when the real token arrived (the swap happened)."""
    import ssl

    from aiohttp import web

    async def echo(request: web.Request) -> web.Response:
        ok = request.headers.get("authorization") == f"Bearer {REAL}"
        return web.Response(status=200 if ok else 401, text="ok" if ok else "no swap")

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    app = web.Application()
    app.router.add_get("/{tail:.*}", echo)
    web.run_app(app, host="127.0.0.1", port=port, ssl_context=ctx, print=None, access_log=None)


@contextlib.contextmanager
def _upstream(work: Path) -> Iterator[tuple[int, Path]]:
    from tests.fakes.tls import TestCA

    ca = TestCA(work / "ca")
    leaf = ca.issue("api.github.com", "localhost")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.bench_e2e", "--upstream", str(leaf.cert_path), str(leaf.key_path), str(port)],
        cwd=Path(__file__).resolve().parent.parent,
    )  # fmt: skip
    try:
        asyncio.run(_wait_port(port, proc))
        yield port, ca.ca_path
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


# --- session throughput ---------------------------------------------------------------


async def _cycles(
    replicas: list[tuple[str, int, Path]], seconds: float, cross: bool
) -> tuple[int, list[float], int, float, dict[str, list[float]]]:
    """Run session cycles for ``seconds``.

    Returns (count, latencies, errors, elapsed, per-phase latencies).
    """
    import ssl

    from airlock.client.proxy import ProxyClient

    clients = [ProxyClient(control) for control, _, _ in replicas]
    ctx = ssl.create_default_context(cafile=str(replicas[0][2]))
    tally = LoadTally()
    phases: dict[str, list[float]] = {p: [] for p in PHASES}
    counter = iter(range(10**9))

    async def one(http: aiohttp.ClientSession, i: int) -> bool:
        ctl = clients[i % len(clients)]
        _, port, _ = replicas[(i + (1 if cross else 0)) % len(replicas)]
        placeholder = f"airlock-gh-bench-{i:010d}"
        mark = time.perf_counter()
        timings: dict[str, float] = {}

        def lap(phase: str) -> None:
            nonlocal mark
            now = time.perf_counter()
            timings[phase] = now - mark
            mark = now

        session = await ctl.create_session(allow=["api.github.com"], ttl_s=120)
        lap("create")
        try:
            rule = {
                "host": "api.github.com",
                "placeholder": placeholder,
                "schemes": ["token", "bearer"],
                "replace": {"scheme": "bearer", "token": REAL},
            }
            await ctl.put_lease(session.session_id, "l", [rule], ttl_s=120)
            lap("lease")
            parts = urlsplit(session.proxy_url)
            auth = aiohttp.encode_basic_auth(parts.username or "", parts.password or "")
            async with http.get(
                "https://api.github.com/bench",
                proxy=f"http://127.0.0.1:{port}",
                proxy_headers={"Proxy-Authorization": auth},
                headers={"authorization": f"token {placeholder}"},
            ) as resp:
                await resp.read()
                ok = resp.status == 200
            lap("request")
            return ok
        finally:
            await ctl.delete_session(session.session_id)
            lap("delete")
            if len(timings) == len(PHASES):
                for phase, value in timings.items():
                    phases[phase].append(value)

    async def worker(deadline: float, record: bool) -> None:
        connector = aiohttp.TCPConnector(ssl=ctx, force_close=True)
        async with aiohttp.ClientSession(connector=connector) as http:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                try:
                    ok = await one(http, next(counter))
                except (aiohttp.ClientError, OSError, RuntimeError):
                    ok = False
                if record:
                    tally.add(ok, started)

    try:
        elapsed = await warm_then_measure(worker, WORKERS, seconds)
    finally:
        for client in clients:
            await client.aclose()
    return len(tally.latencies), tally.latencies, tally.errors, elapsed, phases


def _start_replica(work: Path, up_port: int, up_ca: Path, store: str, ca_from: Any) -> Any:
    from tests.fakes.proxy_harness import ProxyProcess

    proc = ProxyProcess(
        Path(tempfile.mkdtemp(prefix="r-", dir=work)),
        resolve=[f"api.github.com:443:127.0.0.1:{up_port}"],
        upstream_ca=up_ca,
        store=store,
    )
    if ca_from is not None:  # one CA for all replicas, as in deploy/
        proc.state_dir.mkdir(mode=0o700)
        for f in ("ca.pem", "ca.key"):
            shutil.copy(ca_from.state_dir / f, proc.state_dir / f)
    return proc.start()


def _scenarios(
    work: Path, up_port: int, up_ca: Path, seconds: float, rounds: int, notes: list[str]
) -> list[Result]:
    """All replicas stay up; scenarios alternate round by round, so a change in the
    machine's background load hits every scenario alike. Rates are medians over
    rounds, latencies pooled."""
    with contextlib.ExitStack() as stack:
        procs: dict[str, list[Any]] = {}
        mem = _start_replica(work, up_port, up_ca, "memory", None)
        stack.callback(mem.stop)
        procs["(a) 1 replica, memory"] = [mem]
        if shutil.which("redis-server"):
            from tests.fakes.redis_server import redis_server_sync

            redis = stack.enter_context(redis_server_sync())
            r1 = _start_replica(work, up_port, up_ca, redis.url, None)
            stack.callback(r1.stop)
            r2 = _start_replica(work, up_port, up_ca, redis.url, r1)
            stack.callback(r2.stop)
            procs["(b) 1 replica, redis"] = [r1]
            procs["(c) 2 replicas, redis"] = [r1, r2]
        else:
            notes.append("(b), (c) skipped: redis-server is not installed")
        rates: dict[str, list[float]] = {name: [] for name in procs}
        lats: dict[str, list[float]] = {name: [] for name in procs}
        errs: dict[str, int] = dict.fromkeys(procs, 0)
        phase_samples: dict[str, dict[str, list[float]]] = {
            name: {p: [] for p in PHASES} for name in procs
        }
        for _ in range(rounds):
            for name, replicas in procs.items():
                n, lat, errors, elapsed, phases = asyncio.run(
                    _cycles(
                        [(p.control, p.port, p.ca_path) for p in replicas],
                        seconds,
                        cross=len(replicas) > 1,
                    )
                )
                rates[name].append(n / elapsed)
                lats[name] += lat
                errs[name] += errors
                for phase, values in phases.items():
                    phase_samples[name][phase] += values
    return [
        Result(
            name,
            statistics.median(rates[name]),
            percentile(lats[name], 50) * 1000,
            percentile(lats[name], 99) * 1000,
            errs[name],
            {k: percentile(v, 50) * 1000 for k, v in phase_samples[name].items()},
        )
        for name in procs
    ]


# --- idle memory ----------------------------------------------------------------------


def _mem_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in KiB."""
    rss = pss = 0
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    with contextlib.suppress(OSError), open(f"/proc/{pid}/smaps_rollup") as fh:
        for line in fh:
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
    return rss, pss


async def _daemon_memory(work: Path) -> list[list[object]]:
    from tests.fakes.daemon_harness import running_daemon

    bare = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        await asyncio.sleep(1.0)
        bare_rss, bare_pss = _mem_kib(bare.pid)
    finally:
        bare.kill()
        bare.wait()
    workspace = work / "ws"
    (workspace / "src").mkdir(parents=True)
    for i in range(50):
        (workspace / "src" / f"m{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    async with running_daemon(workspace) as daemon, daemon.client() as client:
        await asyncio.sleep(1.0)
        pid = daemon.process.pid
        idle_rss, idle_pss = _mem_kib(pid)
        for i in range(50):
            await client.call("file_read", {"path": f"src/m{i}.py"})
            await client.call("file_search", {"pattern": f"return x \\+ {i}$"})
            await client.call("file_list", {"path": "src"})
            await client.call("diagnostics", {"paths": [f"src/m{i}.py"], "checks": ["syntax"]})
        await asyncio.sleep(1.0)
        used_rss, used_pss = _mem_kib(pid)
    return [
        ["bare python interpreter (baseline)", bare_rss / 1024, bare_pss / 1024, "1.00x"],
        ["airlockd idle after start", idle_rss / 1024, idle_pss / 1024, f"{idle_rss / bare_rss:.2f}x"],
        ["airlockd idle after 200 tool calls", used_rss / 1024, used_pss / 1024, f"{used_rss / bare_rss:.2f}x"],
    ]  # fmt: skip


# --- main -----------------------------------------------------------------------------


def run(seconds: float, rounds: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="al-be-"))
    notes: list[str] = []
    try:
        with _upstream(work) as (up_port, up_ca):
            results = _scenarios(work, up_port, up_ca, seconds, rounds, notes)
        memory = asyncio.run(_daemon_memory(work))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    base = next((r for r in results if r.name.startswith("(b)")), results[0])
    rows = [
        [
            r.name, r.sessions_per_s, r.p50_ms, r.p99_ms, r.errors,
            f"{r.sessions_per_s / base.sessions_per_s:.2f}x" if base.sessions_per_s else "-",
        ]
        for r in results
    ]  # fmt: skip
    print(
        f"Session cycle (create session + 1 lease + 1 swapped HTTPS request + delete), "
        f"{WORKERS} concurrent workers, {rounds} alternating rounds of {seconds:.0f}s per "
        f"scenario (median rate), {os.cpu_count()} CPUs"
    )
    print(table(["scenario", "sessions/s", "p50 ms", "p99 ms", "errors", "vs (b)"], rows))
    print()
    print(
        table(
            ["scenario", *(f"{p} p50 ms" for p in PHASES)],
            [[r.name, *(r.phases_p50_ms[p] for p in PHASES)] for r in results],
        )
    )
    print_last_table(["process", "RSS MiB", "PSS MiB", "RSS vs bare python"], memory, notes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench_e2e")
    parser.add_argument("--seconds", type=float, default=bench_seconds(3))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--upstream", nargs=3, metavar=("CERT", "KEY", "PORT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv if argv is not None else [])
    if args.upstream:
        _serve_upstream(args.upstream[0], args.upstream[1], int(args.upstream[2]))
        return
    run(args.seconds, args.rounds)


if __name__ == "__main__":
    main(sys.argv[1:])
