"""airlock-control-get (deploy/docker/control-get.py): the images' health checks and
the compose CA export. Exercised as a subprocess against a real aiohttp server on a
Unix socket and on TCP, and against the real airlockd."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from tests.fakes.daemon_harness import running_daemon

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "docker" / "control-get.py"
PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
TOKEN = "ctl-token-0123456789"


@dataclass
class Server:
    socket: Path
    tcp: str
    seen_auth: list[str] = field(default_factory=list)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    base = Path(tempfile.mkdtemp(prefix="al-cg-"))
    state = Server(socket=base / "c.sock", tcp="")

    async def ca(request: web.Request) -> web.Response:
        state.seen_auth.append(request.headers.get("Authorization", ""))
        return web.Response(body=PEM)

    async def degraded(request: web.Request) -> web.Response:
        return web.json_response({"status": "degraded"}, status=503)

    app = web.Application()
    app.router.add_get("/v1/ca.pem", ca)
    app.router.add_get("/v1/health", degraded)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, str(state.socket)).start()
    tcp_site = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp_site.start()
    port = tcp_site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    state.tcp = f"tcp://127.0.0.1:{port}"
    try:
        yield state
    finally:
        await runner.cleanup()
        state.socket.unlink(missing_ok=True)
        base.rmdir()


async def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, bytes, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SCRIPT),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env or {},
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out, err.decode()


async def test_fetches_over_unix_socket_to_stdout(server: Server) -> None:
    rc, out, _ = await run("--endpoint", f"unix:{server.socket}", "/v1/ca.pem")
    assert (rc, out) == (0, PEM)
    assert server.seen_auth == [""]


async def test_writes_the_file_atomically_with_readable_mode(
    server: Server, tmp_path: Path
) -> None:
    target = tmp_path / "proxy-ca.pem"
    rc, out, _ = await run("--endpoint", str(server.socket), "-o", str(target), "/v1/ca.pem")
    assert rc == 0 and out == b""
    assert target.read_bytes() == PEM
    assert target.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["proxy-ca.pem"], "no temp file left"


async def test_tcp_with_token_file_from_the_environment(server: Server, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"# control token\n\n{TOKEN} write\n")
    env = {"AIRLOCK_CONTROL": server.tcp, "AIRLOCK_CONTROL_TOKEN_FILE": str(token_file)}
    rc, out, err = await run("/v1/ca.pem", env=env)
    assert (rc, out) == (0, PEM)
    assert server.seen_auth == [f"Bearer {TOKEN}"]
    assert TOKEN not in err


async def test_non_2xx_fails_unless_any_status(server: Server, tmp_path: Path) -> None:
    target = tmp_path / "health.json"
    rc, _, err = await run("--endpoint", server.tcp, "-o", str(target), "/v1/health")
    assert rc == 1 and "HTTP 503" in err
    assert not target.exists(), "a failed fetch must not leave a file for readers"
    rc, _, _ = await run("--endpoint", server.tcp, "--any-status", "/v1/health")
    assert rc == 0


async def test_unreachable_and_bad_usage(tmp_path: Path) -> None:
    rc, _, err = await run("--endpoint", f"unix:{tmp_path / 'nope.sock'}", "/v1/health")
    assert rc == 2 and "unreachable" in err
    rc, _, err = await run("/v1/health")
    assert rc == 64 and "no endpoint" in err
    rc, _, _ = await run("--endpoint", "http://x", "/v1/health")
    assert rc == 64
    rc, _, _ = await run("--endpoint", "unix:/x", "v1/health")
    assert rc == 64
    empty = tmp_path / "empty"
    empty.write_text("# nothing\n")
    rc, _, err = await run("--endpoint", "unix:/x", "--token-file", str(empty), "/v1/health")
    assert rc == 64 and "no token" in err


async def test_health_of_the_real_airlockd(tmp_path: Path) -> None:
    """The sandbox image's HEALTHCHECK: GET /v1/health on airlockd's socket."""
    async with running_daemon(tmp_path) as daemon:
        rc, out, _ = await run("--endpoint", f"unix:{daemon.socket}", "/v1/health")
    assert rc == 0
    assert b'"status":"ok"' in out.replace(b" ", b"")
