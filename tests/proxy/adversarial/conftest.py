"""Shared parts of the adversarial proxy tests: a hostile upstream, raw clients, the grep.

Each module starts its own real airlock-proxy (module scope) in front of one
:class:`~tests.fakes.reflector.Reflector` playing ``api.github.com`` and
``github.com``. Clients are raw: a CONNECT through the proxy, TLS with the
proxy's CA, then HTTP/1.1 bytes or an ``h2`` connection, so every byte the
sandbox would read is available to :func:`leaks`, decoded the way a client
would decode it (chunked framing, Content-Encoding, HPACK).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import socket
import ssl
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import brotli  # type: ignore[import-untyped]
import pytest
import wsproto
import wsproto.events
import zstandard

from airlock.proxy.protocol import SessionInfo
from tests.fakes.proxy_harness import ProxyProcess, proxy_process
from tests.fakes.redis_server import RedisServer, redis_server_sync
from tests.fakes.reflector import Reflector, reflector
from tests.fakes.tls import TestCA

# The upstreams the session/limits/audit modules share (module-scoped, one set a module).
from tests.proxy.adversarial.ops_fixtures import (  # noqa: F401
    ops_ca,
    ops_github,
    ops_other,
    ops_plain,
    ops_proxy,
    proxy_auth,
    send_connect,
)
from tests.proxy.helpers import api_rule, basic, git_rule, placeholder, real_token

HOSTS = ["api.github.com", "github.com"]
H1_ONLY = "api.vercel.com"  # served by a reflector that speaks HTTP/1.1 only
BUFFER_LIMIT = 4 * 1024 * 1024
BIG = BUFFER_LIMIT + 512 * 1024  # past mitmproxy's buffer limit


@pytest.fixture(scope="module")
def upstream_ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("reflector-ca"))


@pytest.fixture(scope="module")
def upstream(upstream_ca: TestCA) -> Iterator[Reflector]:
    with reflector(upstream_ca, *HOSTS) as up:
        yield up


@pytest.fixture(scope="module")
def upstream_h1(upstream_ca: TestCA) -> Iterator[Reflector]:
    """The same reflector, HTTP/1.1 only: an HTTP/2 client's requests are translated."""
    with reflector(upstream_ca, H1_ONLY, alpn=("http/1.1",)) as up:
        yield up


def reflector_resolve(upstream: Reflector, upstream_h1: Reflector) -> list[str]:
    """``--resolve`` entries sending :data:`HOSTS` and :data:`H1_ONLY` to the two reflectors."""
    return [f"{h}:443:127.0.0.1:{upstream.port}" for h in HOSTS] + [
        f"{H1_ONLY}:443:127.0.0.1:{upstream_h1.port}"
    ]


def proxy_to_reflectors(
    tmp: Path,
    upstream_ca: TestCA,
    upstream: Reflector,
    upstream_h1: Reflector,
    extra_args: Sequence[str] = (),
) -> contextlib.AbstractContextManager[ProxyProcess]:
    """A real airlock-proxy resolving :data:`HOSTS` to ``upstream`` and
    :data:`H1_ONLY` to ``upstream_h1`` (a module may start one with its own flags)."""
    return proxy_process(
        tmp,
        resolve=reflector_resolve(upstream, upstream_h1),
        upstream_ca=upstream_ca.ca_path,
        extra_args=extra_args,
    )


def reflector_proxy_fixture(name: str, extra_args: Sequence[str] = ()) -> Any:
    """A module-scoped ``proxy`` fixture: :func:`proxy_to_reflectors` with ``extra_args``,
    its files under a temp directory named ``name``. Assign it to ``proxy`` in a module."""

    @pytest.fixture(scope="module", name="proxy")
    def fixture(
        tmp_path_factory: pytest.TempPathFactory,
        upstream_ca: TestCA,
        upstream: Reflector,
        upstream_h1: Reflector,
    ) -> Iterator[ProxyProcess]:
        tmp = tmp_path_factory.mktemp(name)
        with proxy_to_reflectors(tmp, upstream_ca, upstream, upstream_h1, extra_args) as p:
            yield p

    return fixture


proxy = reflector_proxy_fixture("adversarial")


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    """One redis-server for a module's replicas (module scope, like its proxies)."""
    with redis_server_sync() as server:
        yield server


@dataclass
class Lease:
    """A session with one lease: the sandbox sends ``placeholder``, upstream gets ``real``."""

    proxy: ProxyProcess
    session: SessionInfo
    placeholder: str
    real: str
    basic: bool = False  # git's form: Basic base64(x-access-token:<placeholder>)

    def _form(self, scheme: str, token: str) -> str:
        return basic("x-access-token", token) if self.basic else f"{scheme} {token}"

    @property
    def authorization(self) -> str:
        """What the sandbox sends."""
        return self._form("token", self.placeholder)

    @property
    def reflected(self) -> str:
        """What the upstream receives (and reflects)."""
        return self._form("Bearer", self.real)

    @property
    def scrubbed(self) -> str:
        """What the sandbox reads back in place of :attr:`reflected`."""
        return self._form("Bearer", self.placeholder)

    def leaks(self, data: bytes) -> list[bytes]:
        """The forms of this lease's real token found in ``data`` (empty means clean)."""
        return leaks(data, self.real)


TOKENS: list[str] = []


def open_lease(proxy: ProxyProcess, *, ttl_s: int = 3600, basic: bool = False) -> Lease:
    """A new session with one lease: its placeholder swapped on every reflector host,
    or (``basic``) travelling as git's Basic credential, swapped on ``github.com``."""
    ph, real = placeholder(), real_token()
    if basic:
        allow, lease_id, rules = HOSTS, "git", [git_rule(ph, real, host="github.com")]
    else:
        allow, lease_id = [*HOSTS, H1_ONLY], "l1"
        rules = [api_rule(ph, real, host=h) for h in allow]

    async def make() -> Lease:
        async with proxy.client() as client:
            session = await client.create_session(allow=allow, ttl_s=ttl_s)
            await client.put_lease(session.session_id, lease_id, rules, ttl_s=ttl_s)
        return Lease(proxy, session, ph, real, basic=basic)

    return asyncio.run(make())


@pytest.fixture(scope="module")
def lease(proxy: ProxyProcess) -> Lease:
    """One session whose placeholder is swapped on ``api.github.com``."""
    made = open_lease(proxy)
    TOKENS.append(made.real)
    return made


@pytest.fixture(scope="module")
def basic_lease(proxy: ProxyProcess) -> Lease:
    """A session whose placeholder travels as git does: Basic, swapped on ``github.com``."""
    made = open_lease(proxy, basic=True)
    TOKENS.append(made.real)
    return made


# --- the grep ---------------------------------------------------------------------


def forms(token: str) -> list[bytes]:
    """What counts as the token: itself, either half, Basic and base64 forms."""
    raw = token.encode()
    out = [raw, raw[:20], raw[20:]]
    for user in ("x-access-token", "git"):
        basic = f"{user}:{token}".encode()
        out += [base64.b64encode(basic), base64.urlsafe_b64encode(basic)]
    out += [base64.b64encode(raw)[:-4], base64.b64encode(b"\0" + raw)[4:-4]]
    out += [base64.b64encode(b"\0\0" + raw)[4:-4]]
    return out


def leaks(data: bytes, token: str) -> list[bytes]:
    """The forms of ``token`` found in ``data`` (empty means clean)."""
    return [f[:12] for f in forms(token) if f in data]


def written_leaks(proxy: ProxyProcess, tokens: list[str]) -> list[tuple[str, bytes]]:
    """Forms of ``tokens`` in anything the proxy wrote (audit log, logs, state)."""
    proxy.flush_audit()
    return [
        (str(path), hit)
        for path in proxy.written_files()
        for token in tokens
        for hit in leaks(path.read_bytes(), token)
    ]


def nothing_written(proxy: ProxyProcess) -> None:
    """The check each reflector module ends with: the module's leases minted real
    tokens, and no form of any of them is in a file the proxy wrote."""
    assert TOKENS
    assert written_leaks(proxy, TOKENS) == []


# --- raw clients --------------------------------------------------------------------


def open_tunnel(
    lease: Lease,
    host: str = "api.github.com",
    alpn: str | tuple[str, ...] = "http/1.1",
    timeout: float = 30,
) -> ssl.SSLSocket:
    """CONNECT through the proxy as the lease's session, then TLS with the proxy CA."""
    sock = socket.create_connection(("127.0.0.1", lease.proxy.port), timeout=timeout)
    head = send_connect(sock, proxy_auth(lease.session).encode(), host)
    if b"\r\n\r\n" not in head:
        raise ConnectionError(f"proxy closed during CONNECT: {head!r}")
    assert head.split(b" ")[1] == b"200", head
    ctx = ssl.create_default_context(cafile=str(lease.proxy.ca_path))
    ctx.set_alpn_protocols([alpn] if isinstance(alpn, str) else list(alpn))
    tls = ctx.wrap_socket(sock, server_hostname=host)
    tls.settimeout(timeout)
    return tls


def read_all(sock: ssl.SSLSocket) -> bytes:
    out = bytearray()
    while True:
        try:
            data = sock.recv(1 << 16)
        except (ConnectionError, ssl.SSLError, TimeoutError):
            break
        if not data:
            break
        out += data
    return bytes(out)


def decode_body(body: bytes, encoding: str) -> bytes:
    for coding in reversed([c.strip().lower() for c in encoding.split(",") if c.strip()]):
        if coding in ("gzip", "x-gzip"):
            body = gzip.decompress(body)
        elif coding == "deflate":
            body = zlib.decompress(body)
        elif coding == "br":
            body = brotli.decompress(body)
        elif coding == "zstd":
            body = zstandard.ZstdDecompressor().decompress(body)
    return body


@dataclass
class H1Response:
    raw: bytes
    interim: list[tuple[int, bytes]]  # (status, raw head) of 1xx answers
    status: int
    head: bytes
    headers: list[tuple[str, str]]
    body: bytes  # de-chunked and decoded, as a client would read it
    trailers: bytes
    complete: bool

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    @property
    def everything(self) -> bytes:
        return self.raw + b"\n" + self.head + self.body + self.trailers


def parse_h1(raw: bytes) -> H1Response:
    rest = raw
    interim: list[tuple[int, bytes]] = []
    while True:
        head, sep, rest = rest.partition(b"\r\n\r\n")
        if not sep:
            return H1Response(raw, interim, 0, head, [], b"", b"", False)
        status = int(head.split(b" ", 2)[1])
        if 100 <= status < 200 and status != 101:
            interim.append((status, head))
            continue
        break
    lines = head.decode("latin-1").split("\r\n")
    headers = [(k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines[1:])]
    te = next((v for k, v in headers if k.lower() == "transfer-encoding"), "")
    cl = next((v for k, v in headers if k.lower() == "content-length"), None)
    trailers = b""
    complete = True
    if "chunked" in te.lower():
        body = bytearray()
        complete = False
        while True:
            size_line, sep, rest = rest.partition(b"\r\n")
            if not sep:
                break
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                trailers = rest
                complete = True
                break
            body += rest[:size]
            rest = rest[size + 2 :]
        data = bytes(body)
    elif cl is not None:
        data = rest[: int(cl)]
        complete = len(data) == int(cl)
    else:
        data = rest
    enc = next((v for k, v in headers if k.lower() == "content-encoding"), "")
    # A broken encoding leaves the bytes as they are (the raw bytes are grepped too).
    with contextlib.suppress(OSError, EOFError, zlib.error, brotli.error, zstandard.ZstdError):
        data = decode_body(data, enc)
    return H1Response(raw, interim, status, head, headers, data, trailers, complete)


def h1_get(
    lease: Lease,
    path: str,
    *,
    host: str = "api.github.com",
    headers: dict[str, str] | None = None,
    host_header: str | None = None,
    target: str | None = None,
    raw_request: bytes | None = None,
    timeout: float = 30,
) -> H1Response:
    """One HTTP/1.1 request with the lease's placeholder; reads until the proxy
    closes (or ``timeout`` passes without a byte)."""
    sock = open_tunnel(lease, host, timeout=timeout)
    with sock:
        if raw_request is None:
            lines = [
                f"GET {target or path} HTTP/1.1",
                f"Host: {host_header or host}",
                f"Authorization: {lease.authorization}",
                "Accept-Encoding: gzip",
                "Connection: close",
            ]
            lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
            raw_request = ("\r\n".join(lines) + "\r\n\r\n").encode()
        sock.sendall(raw_request)
        return parse_h1(read_all(sock))


@dataclass
class H2Response:
    raw: bytes
    informational: list[list[tuple[bytes, bytes]]]
    headers: list[tuple[bytes, bytes]]
    body: bytes
    trailers: list[tuple[bytes, bytes]]
    ended: bool  # the whole response arrived

    @property
    def reset(self) -> bool:
        """The response was cut off (a stream reset, as HTTP/2 would say)."""
        return not self.ended

    @property
    def status(self) -> int:
        return int(dict(self.headers).get(b":status", b"0"))

    @property
    def everything(self) -> bytes:
        parts = [self.raw, self.body]
        for block in [*self.informational, self.headers, self.trailers]:
            parts += [k + b": " + v for k, v in block]
        return b"\n".join(parts)


def header_pairs(lines: Iterable[bytes]) -> list[tuple[bytes, bytes]]:
    """``Name: value`` lines as (lower-case name, value) pairs, as HTTP/2 carries them."""
    return [(k.strip().lower(), v.strip()) for k, _, v in (ln.partition(b":") for ln in lines)]


def h2_get(
    lease: Lease,
    path: str,
    *,
    host: str = "api.github.com",
    authority: str | None = None,
    extra: list[tuple[str, str]] | None = None,
) -> H2Response:
    """One request from a sandbox that offers HTTP/2 (and HTTP/1.1).

    The proxy answers the sandbox in HTTP/1.1 only (it selects ``http/1.1``
    whatever is offered), while the upstream side speaks HTTP/2 because the
    sandbox offered it: this is how an HTTP/2 upstream is reached. What the
    sandbox reads is returned in :class:`H2Response`'s shape (lower-case
    header names, ``:status``, trailers), decoded like a client would.
    """
    sock = open_tunnel(lease, host, alpn=("h2", "http/1.1"))
    assert sock.selected_alpn_protocol() == "http/1.1"
    lines = [
        f"GET {path} HTTP/1.1",
        f"Host: {authority or host}",
        f"Authorization: {lease.authorization}",
        "Accept-Encoding: gzip",
        "Connection: close",
        *(f"{k}: {v}" for k, v in (extra or [])),
    ]
    with sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        resp = parse_h1(read_all(sock))
    headers = [(b":status", b"%d" % resp.status)] + [
        (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in resp.headers
    ]
    informational = [
        [(b":status", b"%d" % status), *header_pairs(head.split(b"\r\n")[1:])]
        for status, head in resp.interim
    ]
    trailers = header_pairs(ln for ln in resp.trailers.split(b"\r\n") if ln)
    return H2Response(resp.raw, informational, headers, resp.body, trailers, ended=resp.complete)


def ws_request(ws: wsproto.WSConnection, authorization: str) -> bytes:
    """The opening handshake of a WebSocket to ``api.github.com/ws`` carrying ``authorization``."""
    request = wsproto.events.Request(
        host="api.github.com",
        target="/ws",
        extra_headers=[(b"authorization", authorization.encode())],
    )
    return ws.send(request)


def wait_refusal(proxy: ProxyProcess, reason: str) -> None:
    """Until the proxy has audited a refusal for ``reason``."""
    proxy.wait_audit(
        lambda e: e["event"] == "refusal" and e.get("reason") == reason,
        what=f"a {reason} refusal in the audit log",
    )
