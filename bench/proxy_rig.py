"""The rig the proxy benches share: a local TLS upstream and a real airlock-proxy.

The upstream stands in for api.github.com (the proxy dials it through
``--resolve``, trusting the test CA through ``--upstream-ca``). It runs in its
own process (``python -m bench.proxy_rig CERT KEY PORT``) so it does not share
the load generator's GIL. ``GET /download?size=N`` streams N bytes, chunked and
gzip-encoded, incompressible, with the request's Authorization value echoed
once per MiB (what airlock's response scrubber has to find); ``GET /whoami``
answers the SHA-256 (hex) of the Authorization header it received, so a bench
can check the swap happened without the token travelling back; every other
path answers ``ok``.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import ssl
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp

from airlock.proxy.protocol import SessionInfo
from tests.fakes.net import free_port, wait_port
from tests.fakes.processes import stop_process
from tests.fakes.proxy_harness import ProxyProcess, proxy_process
from tests.fakes.tls import TestCA

DOWNLOAD_BLOCK = 1 << 20
HOST = "api.github.com"
GIT_HOST = "github.com"


def serve_upstream(cert: str, key: str, port: int) -> None:
    """Run the upstream HTTPS server until killed (the subprocess's body)."""
    from aiohttp import web

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def whoami(request: web.Request) -> web.Response:
        return web.Response(text=auth_digest(request.headers.get("authorization", "")))

    async def download(request: web.Request) -> web.StreamResponse:
        """``size`` bytes, chunked, gzip (one member per MiB), auth echoed each MiB."""
        size = int(request.query.get("size", "0"))
        auth = request.headers.get("authorization", "").encode()
        block = os.urandom(DOWNLOAD_BLOCK - len(auth)) + auth
        packed = gzip.compress(block, compresslevel=1)
        resp = web.StreamResponse(
            headers={"content-type": "application/octet-stream", "content-encoding": "gzip"}
        )
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        sent = 0
        while sent < size:
            for i in range(0, len(packed), 1 << 16):
                await resp.write(packed[i : i + (1 << 16)])
            sent += len(block)
        await resp.write_eof()
        return resp

    async def sink(request: web.Request) -> web.Response:
        """Any POST (GraphQL, a git push): read the body as it streams, answer its size."""
        size = 0
        async for chunk in request.content.iter_any():
            size += len(chunk)
        return web.Response(text=str(size))

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    app = web.Application(client_max_size=1 << 30)
    app.router.add_post("/{tail:.*}", sink)
    app.router.add_get("/download", download)
    app.router.add_get("/whoami", whoami)
    app.router.add_get("/{tail:.*}", hello)
    web.run_app(app, host="127.0.0.1", port=port, ssl_context=ctx, print=None, access_log=None)


def auth_digest(value: str) -> str:
    """What ``/whoami`` answers for an Authorization header ``value``."""
    return hashlib.sha256(value.encode()).hexdigest()


async def start_upstream(stack: ExitStack, work: Path) -> tuple[int, TestCA]:
    """The upstream subprocess (stopped by ``stack``): its port and the CA its leaf is from."""
    ca = TestCA(work / "ca")
    leaf = ca.issue(HOST, GIT_HOST, "localhost")
    port = free_port()
    upstream = subprocess.Popen(
        [sys.executable, "-m", "bench.proxy_rig",
         str(leaf.cert_path), str(leaf.key_path), str(port)],
        cwd=Path(__file__).resolve().parent.parent,
    )  # fmt: skip
    stack.callback(stop_process, upstream)
    await wait_port(port, upstream)
    return port, ca


def start_proxy(
    stack: ExitStack, work: Path, up_port: int, ca_path: Path, *, store: str = "memory"
) -> ProxyProcess:
    """A real airlock-proxy (stopped by ``stack``) that resolves api.github.com to the upstream."""
    tmp = Path(tempfile.mkdtemp(prefix="al-bench-", dir=work))
    return stack.enter_context(
        proxy_process(
            tmp,
            resolve=[f"{HOST}:443:127.0.0.1:{up_port}", f"{GIT_HOST}:443:127.0.0.1:{up_port}"],
            upstream_ca=ca_path,
            store=store,
        )
    )


def proxy_headers(session: SessionInfo) -> dict[str, str]:
    """The Proxy-Authorization a sandbox of ``session`` sends."""
    parts = urlsplit(session.proxy_url)
    return {
        "Proxy-Authorization": aiohttp.encode_basic_auth(parts.username or "", parts.password or "")
    }


if __name__ == "__main__":
    serve_upstream(sys.argv[1], sys.argv[2], int(sys.argv[3]))
