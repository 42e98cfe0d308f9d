"""What the GitHub shell tool adds to one ``gh api`` call.

Baseline: the same ``gh api repos/acme/widgets`` run in the same sandbox through
the same proxy, with the real token in ``GH_TOKEN`` (what a sandbox without
airlock would do). Tool: ``GitHubShell.run`` (approve, targets, token from the
provider's cache, lease put, exec with the config-dir wrapper, lease delete,
redaction). Both run against the local fake GitHub through the real
airlock-proxy; runs are interleaved so drift hits both alike. Also measured
alone: a lease put+delete round trip and a provider cache hit.

Target: under 15 ms added at p50 (LocalSandbox and airlockd exec).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from airlock.client.github.shell import GitHubShell
from airlock.client.sandboxes import DaemonSandbox, LocalSandbox, Sandbox
from airlock.proxy.protocol import LeaseRule, Replacement
from bench.report import percentile, table
from tests.fakes.daemon_harness import running_daemon
from tests.fakes.github_proxy import app_provider, github_behind_proxy

ROUNDS = 60
WARMUP = 3
COMMAND = ["gh", "api", "repos/acme/widgets", "--jq", ".name"]


async def _time(fn: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await fn()
    return (time.perf_counter() - started) * 1000


async def _pair(
    shell: GitHubShell, sandbox: Sandbox, workspace: str, real_token: str, cfg: str
) -> tuple[list[float], list[float]]:
    call = {
        "command": " ".join(COMMAND),
        "permissions": [
            {"provider": "github", "repositories": ["acme/widgets"], "access": "write"}
        ],
        "description": "bench",
    }
    direct_env = {"GH_TOKEN": real_token, "GH_CONFIG_DIR": cfg, "GH_NO_UPDATE_NOTIFIER": "1"}

    async def direct() -> None:
        result = await sandbox.run(COMMAND, workspace, direct_env, 60)
        assert result.exit_code == 0 and result.stdout.strip() == "widgets", result.stderr

    async def tool() -> None:
        result = await shell.run(call)
        assert result.exit_code == 0 and result.stdout.strip() == "widgets", result.stderr

    for _ in range(WARMUP):
        await direct()
        await tool()
    base, ours = [], []
    for i in range(ROUNDS):
        # Alternate which goes first, so neither always runs on a warmer cache.
        if i % 2:
            base.append(await _time(direct))
            ours.append(await _time(tool))
        else:
            ours.append(await _time(tool))
            base.append(await _time(direct))
    return base, ours


async def run() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="al-bgh-"))
    rows: list[tuple[object, ...]] = []
    try:
        async with github_behind_proxy(tmp, repos={"acme/widgets": None}) as rig:
            gh, pc, session, env = rig.gh, rig.pc, rig.session, rig.env()
            workspace = tmp / "ws"
            workspace.mkdir()
            provider = app_provider(gh)
            real = (await provider.get_token(["acme/widgets"])).token
            cfg = str(tmp / "direct-gh-config")

            async def measure(label: str, sandbox: Sandbox) -> None:
                shell = GitHubShell(
                    org="acme",
                    provider=provider,
                    proxy=pc,
                    session=session,
                    sandbox=sandbox,
                    workspace=str(workspace),
                    config_dir_base=str(tmp),
                )
                base, ours = await _pair(shell, sandbox, str(workspace), real, cfg)
                rows.extend(_rows(label, base, ours))

            await measure("LocalSandbox", LocalSandbox(base_env=env))

            async with (
                running_daemon(workspace, env=env) as daemon,
                daemon.client() as client,
            ):
                await measure("airlockd exec", DaemonSandbox(client))

            rule = LeaseRule(
                host="api.github.com",
                placeholder="airlock-gh-bench-placeholder",
                schemes=["token", "bearer"],
                replace=Replacement(scheme="bearer", token=real),
            )
            lease_ms = []
            for i in range(ROUNDS * 5):
                lease_ms.append(
                    await _time(lambda i=i: _lease_cycle(pc, session.session_id, i, rule))
                )
            cache_ms = [
                await _time(lambda: provider.get_token(["acme/widgets"])) for _ in range(ROUNDS * 5)
            ]
            rows.append(
                (
                    "lease put+delete alone",
                    percentile(lease_ms, 50),
                    percentile(lease_ms, 99),
                    "",
                    "",
                )
            )
            rows.append(
                (
                    "provider cache hit",
                    percentile(cache_ms, 50),
                    percentile(cache_ms, 99),
                    "",
                    "",
                )
            )
            mints = len(gh.mints)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"gh api through airlock-proxy to the local GitHub; {ROUNDS} interleaved rounds each")
    print(table(["variant", "p50 ms", "p99 ms", "x direct p50", "added ms (paired p50)"], rows))
    print(f"token mints during the whole run: {mints} (the cache serves every command)")
    print("target: added p50 < 15 ms")


async def _lease_cycle(pc: Any, sid: str, i: int, rule: LeaseRule) -> None:
    await pc.put_lease(sid, f"bench-{i}", [rule], 60)
    await pc.delete_lease(sid, f"bench-{i}")


def _rows(label: str, base: list[float], ours: list[float]) -> list[tuple[object, ...]]:
    """Added time is the median of per-round differences (paired, so load drift cancels)."""
    b50, o50 = percentile(base, 50), percentile(ours, 50)
    paired = percentile([o - b for o, b in zip(ours, base, strict=True)], 50)
    return [
        (f"{label}: direct gh, real token", b50, percentile(base, 99), 1.0, 0.0),
        (f"{label}: GitHub shell tool", o50, percentile(ours, 99), o50 / b50, paired),
    ]


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
