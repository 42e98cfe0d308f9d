"""Attack: read the real tokens out of Redis ("also seen": they sat there in
clear, in every RDB snapshot, AOF and replica).

A real proxy with a real redis-server: after a swap, every key and value in
Redis is grepped for the real token in every form: zero. The Redis store
refuses to start without ``--store-key-file`` unless ``--store-plaintext`` is
given (one line, exit 2); a replica with another key fails closed (503) and
never swaps; a sealed value moved to another key does not open.
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import redis as redis_sync

from tests.fakes.net import free_port
from tests.fakes.proxy_harness import PROXY_BIN, ProxyProcess
from tests.fakes.redis_server import RedisServer, redis_contents, reply
from tests.fakes.upstream import EchoUpstream
from tests.proxy.adversarial.ops_fixtures import (
    OpsProxy,
    Seen,
    Tunnel,
    assert_no_token,
    leased_session,
    placeholder,
    real_token,
)
from tests.proxy.helpers import api_rule, git_rule

pytestmark = pytest.mark.timeout(180)

T = TypeVar("T")

SEEN = Seen()


@pytest.fixture(scope="module")
def proxy(ops_proxy: OpsProxy, redis: RedisServer) -> Iterator[ProxyProcess]:
    with ops_proxy("sealed", store=redis.url) as p:
        yield p


async def test_redis_holds_no_real_token_after_a_swap(
    proxy: ProxyProcess, redis: RedisServer, ops_github: EchoUpstream
) -> None:
    ph, ph_git = placeholder(), placeholder()
    token, git_token = real_token(), real_token()
    SEEN.tokens.extend([token, git_token])
    async with proxy.client() as client:
        info = await client.create_session(allow=["api.github.com", "github.com"], ttl_s=120)
        await client.put_lease(
            info.session_id, "l", [api_rule(ph, token), git_rule(ph_git, git_token)], ttl_s=120
        )
    tunnel = Tunnel(proxy, info, "api.github.com", proxy.ca_path, SEEN)
    tunnel.open()
    status, body = tunnel.get("/x", {"authorization": f"token {ph}"})
    tunnel.close()
    assert status == 200 and ph.encode() in body
    assert ops_github.last().one("authorization") == f"Bearer {token}"

    everything = redis_contents(redis.port)
    assert len(everything) >= 6  # session, lease, two placeholders, lease set...
    assert_no_token(SEEN.tokens, everything, [])
    r = redis_sync.Redis(port=redis.port)
    try:
        sealed: list[bytes | None] = [
            reply(r.get(k)) for k in r.scan_iter(match="airlock:*") if r.type(k) == b"string"
        ]
        # Re-bind a sealed placeholder entry to another key: it must not open.
        r.set(f"airlock:ph:{ph_git}", reply(r.get(f"airlock:ph:{ph}")) or b"")
    finally:
        r.close()
    assert sealed and all(v is not None and v.startswith(b"AL1") for v in sealed)

    tunnel = Tunnel(proxy, info, "github.com", proxy.ca_path, SEEN)
    tunnel.open()
    status, _ = tunnel.get(
        "/repo.git/info/refs",
        {
            "authorization": "Basic "
            + base64.b64encode(f"x-access-token:{ph_git}".encode()).decode()
        },
    )
    tunnel.close()
    assert status == 503  # fails closed: nothing swapped, nothing forwarded


async def test_replica_with_another_key_fails_closed(
    tmp_path: Path,
    proxy: ProxyProcess,
    ops_proxy: OpsProxy,
    ops_github: EchoUpstream,
    redis: RedisServer,
) -> None:
    info, ph, _ = await leased_session(proxy, SEEN, ttl_s=120)
    wrong = tmp_path / "wrong-key"
    wrong.write_text(base64.b64encode(os.urandom(32)).decode() + "\n")
    ops_github.clear()
    with ops_proxy("wrong-key", store=redis.url, extra_args=["--store-key-file", str(wrong)]) as b:
        tunnel = Tunnel(b, info, "api.github.com", b.ca_path, SEEN)
        try:
            tunnel.open()
        except OSError as exc:
            assert "503" in str(exc)  # the session itself does not open
        else:
            status, _ = tunnel.get("/x", {"authorization": f"token {ph}"})
            assert status == 503
        tunnel.close()
        SEEN.assert_clean(b.written_files())
    assert ops_github.requests == []


def _start_bare(
    tmp_path: Path, redis: RedisServer, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(PROXY_BIN),
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--state-dir",
            str(tmp_path / "state"),
            "--store",
            redis.url,
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_redis_store_without_a_key_refuses_to_start(tmp_path: Path, redis: RedisServer) -> None:
    result = _start_bare(tmp_path, redis)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--store-key-file" in lines[0] and "--store-plaintext" in lines[0]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("not base64!!\n", "is not base64"),
        (base64.b64encode(b"short").decode(), "expected 32"),
        ("", "no key"),
    ],
)
def test_bad_key_file_refuses_to_start(
    tmp_path: Path, redis: RedisServer, content: str, needle: str
) -> None:
    key = tmp_path / "key"
    key.write_text(content)
    result = _start_bare(tmp_path, redis, "--store-key-file", str(key))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]


def test_zz_no_real_token_anywhere(proxy: ProxyProcess, redis: RedisServer) -> None:
    assert len(SEEN.tokens) >= 3
    SEEN.assert_clean(proxy.written_files(), redis_contents(redis.port))
