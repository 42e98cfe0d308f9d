"""Shared, expensive parts of the proxy tests: one CA and the echo upstreams.

Each test module starts its own airlock-proxy (module scope) so that modules
stay independent; the upstreams live for the whole session.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.proxy_harness import ProxyProcess, proxy_process, running_proxy
from tests.fakes.redis_server import RedisServer, redis_server_sync
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


#: ``start(name, resolve=(), **kwargs)``: a context manager running one airlock-proxy.
ProxyFactory = Callable[..., contextlib.AbstractContextManager[ProxyProcess]]


def proxy_factory(
    tmp_path_factory: pytest.TempPathFactory,
    ca: TestCA,
    github: EchoUpstream,
    other: EchoUpstream,
    plain: EchoUpstream,
) -> ProxyFactory:
    """Starts airlock-proxies that reach these upstreams and trust ``ca``.

    ``name`` names the state directory, ``resolve`` adds to the upstreams'
    entries, other keywords (``extra_args``, ``store``...) go to
    :func:`proxy_process`.
    """

    def start(
        name: str, *, resolve: Sequence[str] = (), **kwargs: Any
    ) -> contextlib.AbstractContextManager[ProxyProcess]:
        return proxy_process(
            tmp_path_factory.mktemp(name),
            resolve=[*github_resolve(github, other, plain), *resolve],
            upstream_ca=ca.ca_path,
            **kwargs,
        )

    return start


@pytest.fixture(scope="module")
def start_proxy(
    tmp_path_factory: pytest.TempPathFactory,
    upstream_ca: TestCA,
    github: EchoUpstream,
    other: EchoUpstream,
    plain: EchoUpstream,
) -> ProxyFactory:
    """:func:`proxy_factory` over this directory's upstreams."""
    return proxy_factory(tmp_path_factory, upstream_ca, github, other, plain)


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    """A fresh redis-server for one test (a test may stop it to see the proxy fail closed)."""
    with redis_server_sync() as server:
        yield server


@pytest.fixture
async def replicas(
    tmp_path: Path, redis: RedisServer, upstream_ca: TestCA, github: EchoUpstream
) -> AsyncIterator[tuple[ProxyProcess, ProxyProcess]]:
    """Two airlock-proxies (state in ``a`` and ``b``) sharing one fresh Redis store, as
    replicas behind one Service do; both reach ``github`` as api.github.com."""
    kwargs: dict[str, Any] = {
        "resolve": [f"api.github.com:443:127.0.0.1:{github.port}"],
        "upstream_ca": upstream_ca.ca_path,
        "store": redis.url,
    }
    async with (
        running_proxy(tmp_path / "a", **kwargs) as a,
        running_proxy(tmp_path / "b", **kwargs) as b,
    ):
        yield a, b


@pytest.fixture
def short_tmp(tmp_path: Path) -> Path:
    return tmp_path
