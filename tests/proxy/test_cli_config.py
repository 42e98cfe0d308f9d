"""airlock-proxy's command line: the exact ``make run`` invocation, and parsing."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import subprocess
from pathlib import Path

import pytest

from airlock.client.proxy import ProxyClient
from airlock.proxy.config import (
    ConfigError,
    ProxyConfig,
    parse_allow,
    parse_control,
    parse_resolve,
)
from airlock.proxy.hosts import host_matches, parse_ip, refused_address
from tests.fakes.net import free_port
from tests.fakes.proxy_harness import PROXY_BIN
from tests.fakes.wait import wait_until

pytestmark = pytest.mark.timeout(120)


async def test_make_run_invocation_with_relative_paths(tmp_path: Path) -> None:
    """``make run`` starts: --control unix:.airlock/proxy.sock --state-dir .airlock/proxy."""
    port = free_port()
    proc = subprocess.Popen(
        [
            str(PROXY_BIN),
            "--listen", f"127.0.0.1:{port}",
            "--control", "unix:.airlock/proxy.sock",
            "--state-dir", ".airlock/proxy",
            "--store", "memory",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    sock = tmp_path / ".airlock" / "proxy.sock"
    try:

        def started() -> bool:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            return sock.exists()

        await wait_until(started, timeout=20, message="airlock-proxy never made its socket")
        async with ProxyClient(f"unix:{sock}") as client:
            assert (await client.health()).status == "ok"
            info = await client.create_session(allow=["api.github.com"])
        assert info.proxy_url.endswith(f"@127.0.0.1:{port}")
        assert (tmp_path / ".airlock" / "proxy" / "ca.pem").exists()
        assert (tmp_path / ".airlock" / "proxy" / "audit.log").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.to_thread(proc.communicate, timeout=15)
    assert proc.returncode == 0, out
    assert not sock.exists(), "the control socket is removed on shutdown"


def test_parse_resolve() -> None:
    assert parse_resolve("api.github.com:443:127.0.0.1:8443") == (
        ("api.github.com", 443),
        ("127.0.0.1", 8443),
    )
    assert parse_resolve("API.GitHub.com.:443:10.1.2.3") == (
        ("api.github.com", 443),
        ("10.1.2.3", 443),
    )
    assert parse_resolve("h.test:443:[::1]:9") == (("h.test", 443), ("::1", 9))
    assert parse_resolve("h.test:443:::1") == (("h.test", 443), ("::1", 443))
    for bad in ("h.test:443", "h.test:x:1.2.3.4", "h.test:443:not-an-ip", "bad host:1:1.1.1.1"):
        with pytest.raises(ConfigError):
            parse_resolve(bad)


def test_parse_control_and_allow(tmp_path: Path) -> None:
    assert parse_control("unix:rel/x.sock", tmp_path).path == tmp_path / "rel/x.sock"
    assert parse_control("/abs/x.sock").path == Path("/abs/x.sock")
    tcp = parse_control("tcp://127.0.0.1:9000")
    assert (tcp.kind, tcp.host, tcp.port) == ("tcp", "127.0.0.1", 9000)
    assert parse_allow(["*.GitHub.com", "*", "x.test"]) == ("*.github.com", "*", "x.test")
    with pytest.raises(ConfigError):
        parse_allow(["a/b"])


def test_host_patterns() -> None:
    assert host_matches("api.github.com", "*.github.com")
    assert not host_matches("github.com", "*.github.com")
    assert not host_matches("evilgithub.com", "*.github.com")
    assert host_matches("github.com", "github.com")
    assert not host_matches("api.github.com", "github.com")
    assert host_matches("anything.example", "*")


@pytest.mark.parametrize(
    ("addr", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("192.168.0.1", "private"),
        ("172.16.0.1", "private"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("100.64.0.1", "non-global"),
        ("::ffff:127.0.0.1", "loopback"),
        ("224.0.0.1", "multicast"),
        ("140.82.112.6", None),
        ("2606:4700::1111", None),
    ],
)
def test_refused_address_classes(addr: str, reason: str | None) -> None:
    ip = parse_ip(addr)
    assert ip is not None
    assert refused_address(ip) == reason


async def test_busy_port_is_a_startup_failure(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = await asyncio.to_thread(
            subprocess.run,
            [
                str(PROXY_BIN), "--listen", f"127.0.0.1:{port}",
                "--control", f"unix:{tmp_path}/c.sock", "--state-dir", str(tmp_path / "s"),
            ],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode != 0
    assert "address already in use" in result.stderr
    assert not (tmp_path / "c.sock").exists()


def _config(tmp_path: Path, *args: str) -> ProxyConfig:
    from airlock.proxy.cli import build_parser, config_from_args

    return config_from_args(build_parser().parse_args(["--state-dir", str(tmp_path), *args]))


def test_limit_flags_and_their_defaults(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    assert (cfg.max_head_bytes, cfg.head_timeout_s, cfg.idle_timeout_s) == (65536, 10.0, 300.0)
    assert (cfg.max_session_connections, cfg.session_rate, cfg.session_burst) == (128, 500.0, 1000)
    assert (cfg.connection_rate, cfg.connection_burst) == (200.0, 400)
    assert (cfg.max_unauthenticated_connections, cfg.unauthenticated_timeout_s) == (64, 5.0)
    cfg = _config(tmp_path, "--max-head-bytes", "1024", "--session-rate", "0")
    assert cfg.max_head_bytes == 1024 and cfg.session_rate == 0
    cfg = _config(
        tmp_path,
        "--connection-rate",
        "0",
        "--max-unauthenticated-connections",
        "8",
        "--unauthenticated-timeout",
        "1.5",
    )
    assert cfg.connection_rate == 0 and cfg.max_unauthenticated_connections == 8
    assert cfg.unauthenticated_timeout_s == 1.5
    for bad in (
        ["--max-head-bytes", "0"],
        ["--head-timeout", "-1"],
        ["--session-burst", "0"],
        ["--connection-burst", "0"],
        ["--max-unauthenticated-connections", "0"],
        ["--unauthenticated-timeout", "0"],
    ):
        with pytest.raises(ConfigError, match=bad[0]):
            _config(tmp_path, *bad)


def test_redis_store_needs_a_key_or_an_explicit_plaintext_choice(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--store-key-file"):
        _config(tmp_path, "--store", "redis://127.0.0.1:1/0")
    assert _config(
        tmp_path, "--store", "redis://127.0.0.1:1/0", "--store-plaintext"
    ).store_plaintext
    key = tmp_path / "key"
    key.write_text(base64.b64encode(os.urandom(32)).decode())
    cfg = _config(tmp_path, "--store", "redis://127.0.0.1:1/0", "--store-key-file", str(key))
    assert cfg.store_key_file == key
    with pytest.raises(ConfigError, match="exclude each other"):
        _config(
            tmp_path, "--store", "redis://h/0", "--store-key-file", str(key), "--store-plaintext"
        )
    key.write_text("c2hvcnQ=\n")
    with pytest.raises(ConfigError, match="expected 32"):
        _config(tmp_path, "--store", "redis://h/0", "--store-key-file", str(key))


def test_github_app_and_exfiltration_flags(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    cfg = _config(tmp_path)
    assert cfg.on_exfiltration == "revoke" and cfg.github_app_id is None
    assert _config(tmp_path, "--on-exfiltration", "refuse").on_exfiltration == "refuse"
    key = tmp_path / "app.pem"
    key.write_bytes(
        rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    cfg = _config(tmp_path, "--github-app-id", "42", "--github-app-key-file", str(key))
    assert (cfg.github_app_id, cfg.github_app_key_file) == ("42", key)
    assert cfg.github_api_url == "https://api.github.com"
    with pytest.raises(ConfigError, match="go together"):
        _config(tmp_path, "--github-app-id", "42")
    with pytest.raises(ConfigError, match="no such file"):
        _config(tmp_path, "--github-app-id", "42", "--github-app-key-file", str(tmp_path / "x"))
    (tmp_path / "bad.pem").write_text("not a key")
    with pytest.raises(ConfigError, match="RSA private key"):
        _config(
            tmp_path, "--github-app-id", "42", "--github-app-key-file", str(tmp_path / "bad.pem")
        )
    with pytest.raises(ConfigError, match="https"):
        _config(tmp_path, "--github-api-url", "http://api.github.com")
