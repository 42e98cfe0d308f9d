"""The real ``vercel`` CLI (npm, 60.1.3) works through the proxy with authenticate_vercel's defaults.

The CLI checks a token's shape before sending anything (a token containing
``-`` is "invalid"), so the placeholder must look like a Vercel token. The
stand-in for api.vercel.com is a small local HTTPS server that answers
``GET /v2/user`` only for the real token. The CLI is installed with npm into
a cached directory under the temp dir (reused across runs); the test skips
only when npm cannot install it, saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from airlock.client.delivery import SandboxSession, authenticate_vercel
from airlock.client.sandboxes import LocalSandbox
from tests.fakes.net import free_port
from tests.fakes.proxy_harness import running_proxy
from tests.fakes.tls import TestCA

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(600)]
VERSION = "60.1.3"
REAL = "RealVercelToken0123456789"  # the stand-in accepts only this


def _install_vercel() -> Path:
    """The CLI's entry point, installed once per machine into a cached temp dir."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the vercel CLI test did not run (install node/npm)")
    cache = Path(tempfile.gettempdir()) / f"airlock-npm-vercel-{VERSION}"
    entry = cache / "node_modules" / ".bin" / "vercel"
    if entry.exists():
        return entry
    staging = Path(tempfile.mkdtemp(prefix="airlock-npm-vercel-"))
    result = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(staging), f"vercel@{VERSION}"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        pytest.skip(
            f"npm could not install vercel@{VERSION} ({' / '.join(tail)}): the vercel CLI "
            "test did not run; it runs where the npm registry is reachable"
        )
    with contextlib.suppress(OSError):
        staging.rename(cache)  # another run may have won the race: use either
    if not entry.exists():
        entry = staging / "node_modules" / ".bin" / "vercel"
    return entry


@contextlib.asynccontextmanager
async def vercel_api(ca: TestCA) -> AsyncIterator[tuple[int, list[str]]]:
    """api.vercel.com: ``GET /v2/user`` for the real token, 403 otherwise."""
    seen: list[str] = []

    async def user(request: web.Request) -> web.Response:
        auth = request.headers.get("authorization", "")
        seen.append(auth)
        if auth != f"Bearer {REAL}":
            return web.json_response(
                {"error": {"code": "forbidden", "message": "bad token"}}, status=403
            )
        return web.json_response(
            {"user": {"id": "u1", "username": "airlock-tester", "email": "t@example.com"}}
        )

    async def other(request: web.Request) -> web.Response:
        seen.append(request.headers.get("authorization", ""))
        return web.json_response({"error": {"code": "not_found", "message": "no"}}, status=404)

    app = web.Application()
    app.router.add_get("/v2/user", user)
    app.router.add_route("*", "/{tail:.*}", other)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(
        runner, "127.0.0.1", port, ssl_context=ca.issue("api.vercel.com").server_context()
    )
    await site.start()
    try:
        yield port, seen
    finally:
        await runner.cleanup()


async def test_vercel_whoami_through_the_proxy(tmp_path: Path) -> None:
    vercel = await asyncio.to_thread(_install_vercel)
    ca = TestCA(tmp_path / "ca")
    async with (
        vercel_api(ca) as (port, seen),
        running_proxy(
            tmp_path / "proxy",
            allow=["api.vercel.com"],
            resolve=[f"api.vercel.com:443:127.0.0.1:{port}"],
            upstream_ca=ca.ca_path,
        ) as proxy,
        proxy.client() as pc,
    ):
        session = await pc.create_session(allow=["api.vercel.com"])
        home = tmp_path / "home"
        home.mkdir()
        env = proxy.client_env(
            session,
            HOME=str(home),
            XDG_DATA_HOME=str(home / ".local" / "share"),
            VERCEL_TELEMETRY_DISABLED="1",
            NO_UPDATE_NOTIFIER="1",
            CI="1",
            PATH=os.environ.get("PATH", ""),
        )
        sandbox = LocalSandbox(base_env=env)
        delivery = await authenticate_vercel(
            SandboxSession(sandbox=sandbox, workspace=str(home), proxy=pc,
                           session_id=session.session_id),
            REAL,
        )  # fmt: skip
        script = (
            f'. "$HOME/.airlock/credentials.env" && exec "{vercel}" whoami --token "$VERCEL_TOKEN"'
        )
        result = await sandbox.run(["sh", "-c", script], str(home), {}, 240)
        assert result.exit_code == 0, result.stdout + result.stderr
        assert "airlock-tester" in result.stdout + result.stderr
        assert f"Bearer {REAL}" in seen  # the stand-in received the real token
        assert delivery.placeholder and f"Bearer {delivery.placeholder}" not in seen
        assert REAL not in result.stdout + result.stderr
        for path in home.rglob("*"):
            if path.is_file():
                assert REAL.encode() not in path.read_bytes(), path
