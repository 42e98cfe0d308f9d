"""Shared, expensive parts of the proxy tests: one CA and the echo upstreams.

Each test module starts its own airlock-proxy (module scope) so that modules
stay independent; the upstreams live for the whole session.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.tls import TestCA
from tests.fakes.upstream import EchoUpstream, echo_upstream


@pytest.fixture(scope="session")
def upstream_ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("upstream-ca"))


@pytest.fixture(scope="session")
def github(upstream_ca: TestCA) -> Iterator[EchoUpstream]:
    """Plays api.github.com, github.com and api.vercel.com over TLS."""
    with echo_upstream(upstream_ca, "api.github.com", "github.com", "api.vercel.com") as up:
        yield up


@pytest.fixture(scope="session")
def other(upstream_ca: TestCA) -> Iterator[EchoUpstream]:
    """An allowed host outside the intercept set (passthrough)."""
    with echo_upstream(upstream_ca, "other.test") as up:
        yield up


@pytest.fixture(scope="session")
def untrusted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EchoUpstream]:
    """Claims to be vercel.com with a certificate from a CA the proxy does not trust."""
    rogue_ca = TestCA(tmp_path_factory.mktemp("rogue-ca"))
    with echo_upstream(rogue_ca, "vercel.com") as up:
        yield up


@pytest.fixture(scope="session")
def plain(upstream_ca: TestCA) -> Iterator[EchoUpstream]:
    """A plain-http upstream."""
    with echo_upstream(None) as up:
        yield up


def github_resolve(github: EchoUpstream, other: EchoUpstream, plain: EchoUpstream) -> list[str]:
    p = github.port
    return [
        f"api.github.com:443:127.0.0.1:{p}",
        f"github.com:443:127.0.0.1:{p}",
        f"api.vercel.com:443:127.0.0.1:{p}",
        f"api.github.com:8443:127.0.0.1:{p}",
        f"other.test:443:127.0.0.1:{other.port}",
        f"plain.test:80:127.0.0.1:{plain.port}",
        f"api.github.com:80:127.0.0.1:{plain.port}",
    ]


@pytest.fixture
def short_tmp(tmp_path: Path) -> Path:
    return tmp_path
