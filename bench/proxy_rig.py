"""The rig the proxy benches share: a local TLS upstream and a real airlock-proxy.

The upstream stands in for api.github.com (the proxy dials it through
``--resolve``, trusting the test CA through ``--upstream-ca``). It runs in its
own process (``python -m bench.proxy_rig CERT KEY PORT``) so it does not share
the load generator's GIL. ``GET /download?size=N`` streams N bytes (chunked and
gzip-encoded by default; ``framing=cl`` sends a Content-Length, ``enc=identity``
no coding), incompressible, with the request's Authorization value echoed
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
from tests.fakes.proxy_harness import ProxyProcess
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
        """``size`` bytes in MiB blocks, auth echoed each MiB; gzip (one member per
        block) unless ``enc=identity``; chunked unless ``framing=cl``."""
        size = int(request.query.get("size", "0"))
        auth = request.headers.get("authorization", "").encode()
        block = os.urandom(DOWNLOAD_BLOCK - len(auth)) + auth
        gzipped = request.query.get("enc", "gzip") == "gzip"
        packed = gzip.compress(block, compresslevel=1) if gzipped else block
        headers = {"content-type": "application/octet-stream"}
        if gzipped:
            headers["content-encoding"] = "gzip"
        resp = web.StreamResponse(headers=headers)
        if request.query.get("framing") == "cl":
            resp.content_length = len(packed) * -(-size // len(block))
        else:
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


class UnguardedProxy(ProxyProcess):
    """airlock-proxy without its connection-level guard (``bench/unguarded_proxy.py``)."""

    def argv(self) -> list[str]:
        script = Path(__file__).with_name("unguarded_proxy.py")
        return [sys.executable, str(script), *super().argv()[1:]]


class SourceProxy(ProxyProcess):
    """airlock-proxy run from another source tree (``source``, e.g. ``git archive main``
    unpacked): the "before" of a change, benched in the same run as the "after"."""

    source: Path = Path()

    def argv(self) -> list[str]:
        boot = (
            f"import sys; sys.path.insert(0, {str(self.source)!r}); "
            "from airlock.proxy.cli import main; sys.exit(main())"
        )
        return [sys.executable, "-c", boot, *super().argv()[1:]]


UNLIMITED_RATE = ("--session-rate", "1000000", "--session-burst", "1000000")


def start_proxy(
    stack: ExitStack,
    work: Path,
    up_port: int,
    ca_path: Path,
    *,
    store: str = "memory",
    guard: bool = True,
    source: Path | None = None,
) -> ProxyProcess:
    """A real airlock-proxy (stopped by ``stack``) that resolves api.github.com to the upstream."""
    tmp = Path(tempfile.mkdtemp(prefix="al-bench-", dir=work))
    kind = ProxyProcess if guard else UnguardedProxy
    proc = (SourceProxy if source is not None else kind)(
        tmp,
        resolve=[f"{HOST}:443:127.0.0.1:{up_port}", f"{GIT_HOST}:443:127.0.0.1:{up_port}"],
        upstream_ca=ca_path,
        store=store,
        # The bench measures the proxy's cost, not its session rate limit (500 a second by
        # default, which a fast proxy under 16 keep-alive clients would reach and answer 429).
        extra_args=UNLIMITED_RATE,
    )
    if isinstance(proc, SourceProxy) and source is not None:
        proc.source = source.resolve()
    proc.start()
    stack.callback(proc.stop)
    return proc


def proxy_headers(session: SessionInfo) -> dict[str, str]:
    """The Proxy-Authorization a sandbox of ``session`` sends."""
    parts = urlsplit(session.proxy_url)
    return {
        "Proxy-Authorization": aiohttp.encode_basic_auth(parts.username or "", parts.password or "")
    }


if __name__ == "__main__":
    serve_upstream(sys.argv[1], sys.argv[2], int(sys.argv[3]))
