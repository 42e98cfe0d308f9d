"""Fair under floods (issue 22): one session cannot take the proxy from the others.

The contract bounds a latency here because it is the fairness property itself:
while one session floods (HTTP/2 rapid reset, HTTP/1.1 keep-alive requests,
new connections), every other session's CONNECT is still answered within one
second. The flood runs in a process of its own (``flooder.py``) so its CPU and
GIL do not slow the measuring side, and so does the victim's probe (the
upstream reflector runs in this process and is busy during the flood); the
probe measures from its socket connect to the last byte of the CONNECT
answer's head, and a CONNECT not answered within 5 s counts as 5 s.

Where intercepted tunnels speak only HTTP/1.1 to the sandbox (the ALPN guard),
the HTTP/2 workers are offered ``http/1.1`` and flood requests over it
instead (``h2_refused`` in the flooder's stats): the limits under test do not
depend on which protocol the sandbox gets. On the main branch before these
limits the mixed flood made the other session's CONNECTs time out (5 s) and
the proxy needed about a minute to recover.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airlock.proxy.protocol import SessionInfo
from tests.fakes.proxy_harness import ProxyProcess, proxy_process
from tests.fakes.reflector import Reflector, reflector
from tests.fakes.tls import TestCA
from tests.proxy.adversarial.ops_fixtures import credentials

pytestmark = pytest.mark.timeout(180)

FLOODER = Path(__file__).with_name("flooder.py")
INTERCEPTED = "api.github.com"
PASSTHROUGH = "other.test"
FLOOD_S = 10.0


@pytest.fixture(scope="module")
def upstream_ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("fair-ca"))


@pytest.fixture(scope="module")
def upstream(upstream_ca: TestCA) -> Iterator[Reflector]:
    with reflector(upstream_ca, INTERCEPTED, PASSTHROUGH) as up:
        yield up


@pytest.fixture(scope="module")
def proxy(
    tmp_path_factory: pytest.TempPathFactory, upstream_ca: TestCA, upstream: Reflector
) -> Iterator[ProxyProcess]:
    with proxy_process(
        tmp_path_factory.mktemp("fair"),
        resolve=[f"{h}:443:127.0.0.1:{upstream.port}" for h in (INTERCEPTED, PASSTHROUGH)],
        upstream_ca=upstream_ca.ca_path,
    ) as p:
        yield p


def _session(proxy: ProxyProcess) -> SessionInfo:
    async def make() -> SessionInfo:
        async with proxy.client() as client:
            return await client.create_session(allow=[INTERCEPTED, PASSTHROUGH], ttl_s=600)

    return asyncio.run(make())


def _argv(
    proxy: ProxyProcess,
    kind: str,
    seconds: float,
    session: SessionInfo,
    host: str,
    cafile: Path | None = None,
) -> list[str]:
    user, secret = credentials(session)
    return [
        sys.executable,
        str(FLOODER),
        kind,
        str(seconds),
        str(proxy.port),
        user,
        secret,
        host,
        str(cafile or proxy.ca_path),
    ]


def measure_during_flood(
    proxy: ProxyProcess,
    flooder: SessionInfo,
    victim: SessionInfo,
    *,
    kind: str,
    host: str,
    workers: int,
    seconds: float = FLOOD_S,
    cafile: Path | None = None,
) -> tuple[list[float], dict[str, Any]]:
    """Flood as ``flooder`` (``kind`` to ``host`` with ``workers`` workers, see
    ``flooder.py``); meanwhile ``victim`` CONNECTs five times a second."""
    flood = subprocess.Popen(
        [*_argv(proxy, kind, seconds, flooder, host, cafile), str(workers)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert flood.stdout is not None
    # Measure only once the flood is under way (its first tunnel is through).
    assert flood.stdout.readline().strip() == "flooding", flood.stderr
    probe = subprocess.run(
        _argv(proxy, "probe", seconds - 1.5, victim, PASSTHROUGH),
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=True,
    )
    out, err = flood.communicate(timeout=seconds + 60)
    assert flood.returncode == 0, err[-2000:]
    latencies: list[float] = json.loads(probe.stdout)
    return latencies, json.loads(out.strip().splitlines()[-1])


def test_other_sessions_connect_within_a_second_during_a_flood(proxy: ProxyProcess) -> None:
    """Ten seconds of every flood at once from one session (six workers: HTTP/2
    rapid reset in one write and in two, HTTP/1.1 keep-alive request floods,
    new connections) while another session CONNECTs five times a second: each
    CONNECT is answered within one second (the contract's bound, asserted
    as is: it is the fairness promise, not a performance target)."""
    flooder, victim = _session(proxy), _session(proxy)
    latencies, stats = measure_during_flood(
        proxy, flooder, victim, kind="mixed", host=INTERCEPTED, workers=6
    )
    assert len(latencies) >= 20, latencies
    assert stats["streams"] or stats["requests"], stats  # the flood did flood
    assert max(latencies) < 1.0, (sorted(latencies)[-5:], stats)
    assert proxy.process is not None and proxy.process.poll() is None


def test_rapid_reset_through_a_passthrough_tunnel_costs_other_sessions_nothing(
    proxy: ProxyProcess, upstream_ca: TestCA
) -> None:
    """A passthrough tunnel relays the flood's bytes to the upstream untouched
    (the proxy parses none of it): other sessions are still answered at once.
    A guard against regressions (the read gate covers passthrough reads too);
    it held before these limits as well."""
    flooder, victim = _session(proxy), _session(proxy)
    latencies, stats = measure_during_flood(
        proxy,
        flooder,
        victim,
        kind="h2-reset",
        host=PASSTHROUGH,
        workers=1,
        seconds=3.0,
        cafile=upstream_ca.ca_path,
    )
    assert stats["streams"], stats
    assert max(latencies) < 1.0, (sorted(latencies)[-5:], stats)
