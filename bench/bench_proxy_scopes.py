"""Lease scopes on the hot path: what ``allow`` costs a swapped request and a push.

Run through ``python -m bench.bench_proxy --scopes`` (one airlock-proxy, one
upstream, interleaved rounds so machine noise falls on every scenario alike):

- swapped-request latency (HTTPS, keep-alive, 16 clients) for a rule with no
  ``allow``, with ``methods`` + ``paths`` (GET), and for GraphQL
  (``POST /graphql`` with a query) with no ``allow`` and with a ``graphql``
  rule (graphql-core parses each query document once; repeated documents
  hit a cache, as a client's fixed queries do). Goal: p50 within 10% of no
  ``allow``. The in-process decision cost is printed too, with the parse of
  a document seen for the first time.
- a 50 MiB push body (a command list, then incompressible "pack" bytes)
  ``POST``ed to ``/acme/widgets.git/git-receive-pack`` on github.com with a
  ``push_refs`` rule (the command list is held and judged before the
  upstream connection opens, then the rest streams) against the same rule
  without ``allow``. The upstream only reads the body: this measures the
  proxy's cost, not git's. Goal: MiB/s within 10%.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import ssl
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path

import aiohttp

from bench.proxy_rig import proxy_headers, start_proxy, start_upstream
from bench.report import bench_seconds, figure, percentile, small, table

CONCURRENCY = 16
REAL = "ghs_bench_real_token_" + "x" * 20
PUSH_MIB = 50
QUERY = json.dumps(
    {
        "query": 'query PullRequest { repository(owner: "acme", name: "widgets") '
        "{ pullRequest(number: 1) { title state } } }"
    }
).encode()


def _placeholder(i: int) -> str:
    return f"ghs_bench{i:031d}"


SCENARIOS: list[tuple[str, str, str, dict[str, object] | None]] = [
    # name, method, path, allow
    ("GET, no allow", "GET", "/repos/acme/widgets/pulls", None),
    (
        "GET, methods + paths",
        "GET",
        "/repos/acme/widgets/pulls",
        {"methods": ["GET", "HEAD"], "paths": ["/repos/acme/widgets/**", "/user"]},
    ),
    ("POST /graphql, no allow", "POST", "/graphql", None),
    ("POST /graphql, graphql rule", "POST", "/graphql", {"graphql": {"operations": ["query"]}}),
]


def _rule(
    host: str, placeholder: str, allow: dict[str, object] | None, basic: bool
) -> dict[str, object]:
    rule: dict[str, object] = {
        "host": host,
        "placeholder": placeholder,
        "schemes": ["basic"] if basic else ["token", "bearer"],
        "replace": {"scheme": "basic" if basic else "bearer", "token": REAL},
    }
    if allow is not None:
        rule["allow"] = allow
    return rule


async def _load(
    url: str, method: str, proxy: str, headers: dict[str, str], ca: str, seconds: float,
    auth: str,
) -> list[float]:  # fmt: skip
    ctx = ssl.create_default_context(cafile=ca)
    latencies: list[float] = []
    body = QUERY if method == "POST" else None

    async def worker(deadline: float, record: bool) -> None:
        connector = aiohttp.TCPConnector(limit=1, ssl=ctx)
        async with aiohttp.ClientSession(connector=connector) as session:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                async with session.request(
                    method, url, proxy=proxy, proxy_headers=headers, data=body,
                    headers={"authorization": auth, "content-type": "application/json"},
                ) as resp:  # fmt: skip
                    await resp.read()
                    if resp.status != 200:
                        raise RuntimeError(f"{method} {url}: HTTP {resp.status}")
                if record:
                    latencies.append(time.perf_counter() - started)

    warm = time.perf_counter() + 0.5
    await asyncio.gather(*(worker(warm, False) for _ in range(CONCURRENCY)))
    deadline = time.perf_counter() + seconds
    await asyncio.gather(*(worker(deadline, True) for _ in range(CONCURRENCY)))
    return latencies


def _push_body() -> tuple[bytes, bytes]:
    """(command list, one MiB of pack bytes)."""
    line = f"{'a' * 40} {'b' * 40} refs/heads/agent/bench\0report-status side-band-64k\n"
    commands = b"%04x" % (len(line) + 4) + line.encode() + b"0000"
    return commands, os.urandom(1 << 20)


async def _push(url: str, proxy: str, headers: dict[str, str], ca: str, auth: str) -> float:
    """One 50 MiB push body, chunked: MiB/s."""
    ctx = ssl.create_default_context(cafile=ca)
    commands, block = _push_body()

    async def body() -> AsyncIterator[bytes]:
        yield commands + b"PACK"
        for _ in range(PUSH_MIB):
            yield block

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
        started = time.perf_counter()
        async with session.post(
            url, data=body(), proxy=proxy, proxy_headers=headers,
            headers={"authorization": auth,
                     "content-type": "application/x-git-receive-pack-request"},
        ) as resp:  # fmt: skip
            text = await resp.text()
            if resp.status != 200 or int(text) < PUSH_MIB << 20:
                raise RuntimeError(f"push: HTTP {resp.status} {text[:200]}")
        return PUSH_MIB / (time.perf_counter() - started)


def _decision_costs(n: int = 20_000) -> list[list[object]]:
    """The scope decision alone, in process: what ``allow`` adds to a request's CPU time."""
    from airlock.proxy.protocol import Allow
    from airlock.proxy.scope.check import BodyGate, check_head

    rows: list[list[object]] = []
    for name, method, path, allow in SCENARIOS:
        if allow is None:
            continue
        parsed = Allow.model_validate(allow)
        samples: list[float] = []
        for _ in range(n):
            started = time.perf_counter()
            decision = check_head(parsed, "api.github.com", method, path)
            if isinstance(decision, BodyGate):
                decision.feed(QUERY, True)
            samples.append(time.perf_counter() - started)
        rows.append(
            [
                name,
                n,
                f"{percentile(samples, 50) * 1e6:.1f}",
                f"{percentile(samples, 99) * 1e6:.1f}",
            ]
        )
    from airlock.proxy.scope import graphql as gql

    uncached: list[float] = []
    graphql_allow = Allow.model_validate({"graphql": {"operations": ["query"]}})
    for _ in range(n // 4):
        gql._cached_operations.cache_clear()
        started = time.perf_counter()
        gate = check_head(graphql_allow, "api.github.com", "POST", "/graphql")
        assert isinstance(gate, BodyGate)
        gate.feed(QUERY, True)
        uncached.append(time.perf_counter() - started)
    rows.append(
        ["POST /graphql, graphql rule, first sight of the query", len(uncached),
         f"{percentile(uncached, 50) * 1e6:.1f}", f"{percentile(uncached, 99) * 1e6:.1f}"]
    )  # fmt: skip
    commands, _ = _push_body()
    gate_samples: list[float] = []
    push_allow = Allow.model_validate(
        {"git": {"repos": ["acme/widgets"], "push_refs": ["refs/heads/agent/*"]}}
    )
    for _ in range(n):
        started = time.perf_counter()
        gate = check_head(push_allow, "github.com", "POST", "/acme/widgets.git/git-receive-pack")
        assert isinstance(gate, BodyGate)
        gate.feed(commands + b"PACK", False)
        gate_samples.append(time.perf_counter() - started)
    rows.append(
        ["push, push_refs (command list)", n,
         f"{percentile(gate_samples, 50) * 1e6:.1f}", f"{percentile(gate_samples, 99) * 1e6:.1f}"]
    )  # fmt: skip
    return rows


def _basic(placeholder: str) -> str:
    return aiohttp.BasicAuth("x-access-token", placeholder).encode()


async def run(seconds: float, rounds: int, push_rounds: int) -> None:
    from airlock.client.proxy import ProxyClient

    work = Path(tempfile.mkdtemp(prefix="al-bench-scopes-"))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, work, True)
        up_port, ca = await start_upstream(stack, work)
        proxy = start_proxy(stack, work, up_port, ca.ca_path)
        async with ProxyClient(proxy.control) as client:
            session = await client.create_session(
                allow=["api.github.com", "github.com"], ttl_s=3600
            )
            for i, (_, _, _, allow) in enumerate(SCENARIOS):
                rule = _rule("api.github.com", _placeholder(i), allow, basic=False)
                await client.put_lease(session.session_id, f"s{i}", [rule], ttl_s=3600)
            git_none = _rule("github.com", _placeholder(10), None, basic=True)
            git_refs = _rule(
                "github.com",
                _placeholder(11),
                {"git": {"repos": ["acme/widgets"], "push_refs": ["refs/heads/agent/*"]}},
                basic=True,
            )
            await client.put_lease(session.session_id, "g0", [git_none], ttl_s=3600)
            await client.put_lease(session.session_id, "g1", [git_refs], ttl_s=3600)
        headers = proxy_headers(session)
        proxy_url = f"http://127.0.0.1:{proxy.port}"
        ca_path = str(proxy.ca_path)
        samples: dict[str, list[float]] = {name: [] for name, *_ in SCENARIOS}
        for _ in range(rounds):
            for i, (name, method, path, _) in enumerate(SCENARIOS):
                samples[name] += await _load(
                    f"https://api.github.com{path}", method, proxy_url, headers, ca_path,
                    seconds / rounds, f"Bearer {_placeholder(i)}",
                )  # fmt: skip
        push_url = "https://github.com/acme/widgets.git/git-receive-pack"
        speeds: dict[str, list[float]] = {"no allow": [], "push_refs": []}
        for _ in range(push_rounds):
            speeds["no allow"].append(
                await _push(push_url, proxy_url, headers, ca_path, _basic(_placeholder(10)))
            )
            speeds["push_refs"].append(
                await _push(push_url, proxy_url, headers, ca_path, _basic(_placeholder(11)))
            )

    def p50(name: str) -> float:
        return percentile(samples[name], 50) * 1000

    rows = []
    for i, (name, *_rest) in enumerate(SCENARIOS):
        base = SCENARIOS[i - i % 2][0]
        rows.append(
            [name, len(samples[name]), f"{p50(name):.2f}",
             f"{percentile(samples[name], 99) * 1000:.2f}", f"{p50(name) / p50(base):.2f}x"]
        )  # fmt: skip
    print(
        f"Swapped requests with lease scopes, {CONCURRENCY} clients, keep-alive, "
        f"{seconds:.0f}s per scenario in {rounds} interleaved rounds"
    )
    print(table(["scenario", "n", "p50 ms", "p99 ms", "p50 vs no allow"], rows))
    print("goal: within 1.10x")
    for i, (name, *_rest) in enumerate(SCENARIOS):
        if i % 2:
            base = SCENARIOS[i - 1][0]
            figure(
                f"swapped p50, {name}",
                p50(name),
                baseline=p50(base),
                baseline_name=base,
                target="<= 1.10x",
            )
    print()
    base_push = statistics.median(speeds["no allow"])
    push_rows = [
        [name, PUSH_MIB, len(v), f"{statistics.median(v):.1f}", f"{statistics.median(v) / base_push:.2f}x"]
        for name, v in speeds.items()
    ]  # fmt: skip
    print(
        table(["scope decision, in process", "n", "p50 us", "p99 us"], _decision_costs()),
    )
    print()
    print(f"Push of a {PUSH_MIB} MiB body to git-receive-pack (median of interleaved rounds)")
    print(table(["rule", "MiB", "rounds", "MiB/s", "vs no allow"], push_rows))
    print("goal: push_refs >= 0.90x")
    figure(
        f"{PUSH_MIB} MiB push, push_refs",
        statistics.median(speeds["push_refs"]),
        unit="MiB/s",
        baseline=base_push,
        baseline_name="no allow",
        target=">= 0.90x",
    )


def main(argv: list[str] | None = None) -> None:
    """``python -m bench`` entry: a shorter run at small scale."""
    seconds = bench_seconds(3 if small() else 9)
    rounds = 2 if small() else 3
    asyncio.run(run(seconds, rounds, rounds))
