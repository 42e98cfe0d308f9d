"""Shared parts of the session/limits/policy adversarial tests.

Real airlock-proxy subprocesses (``tests/fakes/proxy_harness.py``), real TLS
upstreams (``tests/proxy/conftest.py``), byte-level clients that keep every
byte they received, and the final check every module ends with: the real
tokens appear nowhere the sandbox could read or the proxy wrote.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import select
import socket
import ssl
import sys
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from airlock.proxy.protocol import SessionInfo
from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.tls import TestCA
from tests.fakes.upstream import EchoUpstream, echo_upstream
from tests.proxy.adversarial.flooder import read_head
from tests.proxy.conftest import ProxyFactory, proxy_factory
from tests.proxy.helpers import api_rule

FAULTY_PROXY = Path(__file__).with_name("faulty_proxy.py")


# Upstreams under names of their own, so a conftest in this directory that
# defines narrower-scoped ``upstream_ca``/``github`` fixtures cannot shadow
# what these modules depend on. Import them into a test module to use them.
@pytest.fixture(scope="module")
def ops_ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("ops-upstream-ca"))


@pytest.fixture(scope="module")
def ops_github(ops_ca: TestCA) -> Iterator[EchoUpstream]:
    """Plays api.github.com, github.com and api.vercel.com over TLS (echoes Authorization)."""
    with echo_upstream(ops_ca, "api.github.com", "github.com", "api.vercel.com") as up:
        yield up


@pytest.fixture(scope="module")
def ops_other(ops_ca: TestCA) -> Iterator[EchoUpstream]:
    """An allowed host outside the intercept set (passthrough)."""
    with echo_upstream(ops_ca, "other.test") as up:
        yield up


@pytest.fixture(scope="module")
def ops_plain() -> Iterator[EchoUpstream]:
    """A plain-http upstream."""
    with echo_upstream(None) as up:
        yield up


#: ``ops_proxy(name, **kwargs)``: a context manager running one airlock-proxy.
OpsProxy = ProxyFactory


@pytest.fixture(scope="module")
def ops_proxy(
    tmp_path_factory: pytest.TempPathFactory,
    ops_ca: TestCA,
    ops_github: EchoUpstream,
    ops_other: EchoUpstream,
    ops_plain: EchoUpstream,
) -> OpsProxy:
    """Starts airlock-proxies that reach the ops upstreams and trust their CA."""
    return proxy_factory(tmp_path_factory, ops_ca, ops_github, ops_other, ops_plain)


def real_token() -> str:
    return f"ghs_REAL{uuid.uuid4().hex}{uuid.uuid4().hex[:8]}"


def placeholder() -> str:
    return f"airlock-gh-{uuid.uuid4()}"


def needles(tokens: Iterable[str]) -> list[bytes]:
    """Every form a real token could leak in: raw, Basic, bare base64, a prefix."""
    out: list[bytes] = []
    for t in tokens:
        out.append(t.encode())
        out.append(t[:24].encode())
        out.append(base64.b64encode(t.encode()).rstrip(b"="))
        for user in ("x-access-token", "git", "user"):
            out.append(base64.b64encode(f"{user}:{t}".encode()).rstrip(b"="))
    return out


def assert_no_token(tokens: Iterable[str], blobs: Iterable[bytes], files: Iterable[Path]) -> None:
    """Zero occurrences of any real token form in what the client got or the proxy wrote."""
    forms = needles(tokens)
    assert forms, "no tokens to look for"
    hits = [(i, n[:10]) for i, blob in enumerate(blobs) for n in forms if n in blob]
    assert hits == [], f"real token reached the client: {hits}"
    file_hits = [(str(p), n[:10]) for p in files for n in forms if n in p.read_bytes()]
    assert file_hits == [], f"real token in a file the proxy wrote: {file_hits}"


def credentials(session: SessionInfo) -> tuple[str, str]:
    parts = urlsplit(session.proxy_url)
    assert parts.username and parts.password
    return parts.username, parts.password


def proxy_auth(session: SessionInfo) -> str:
    user, secret = credentials(session)
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@dataclass
class Received:
    """Every byte a test client received, for the final token grep."""

    blobs: list[bytes] = field(default_factory=list)

    def add(self, data: bytes) -> bytes:
        self.blobs.append(data)
        return data


@dataclass
class Seen(Received):
    """A module's evidence for its final grep: every byte its clients received
    (it is the :class:`Received` the clients add to) and every real token it minted."""

    tokens: list[str] = field(default_factory=list)

    def assert_clean(self, files: Iterable[Path], blobs: Iterable[bytes] = ()) -> None:
        """The final grep: no token this module minted in what its clients received
        (plus ``blobs``) or in ``files``."""
        assert_no_token(self.tokens, [*self.blobs, *blobs], files)


async def leased_session(
    proxy: ProxyProcess,
    seen: Seen,
    *,
    allow: Sequence[str] = ("api.github.com",),
    ttl_s: int = 60,
    session_id: str | None = None,
    ph: str | None = None,
    lease_id: str = "l",
) -> tuple[SessionInfo, str, str]:
    """A session with one ``api.github.com`` lease: (session, placeholder, real token).

    The real token is new and joins ``seen.tokens``, so the module's final grep
    looks for it.
    """
    ph = ph or placeholder()
    token = real_token()
    seen.tokens.append(token)
    async with proxy.client() as client:
        info = await client.create_session(allow=allow, ttl_s=ttl_s, session_id=session_id)
        await client.put_lease(info.session_id, lease_id, [api_rule(ph, token)], ttl_s=ttl_s)
    return info, ph, token


class Tunnel:
    """A keep-alive HTTPS connection through one CONNECT tunnel (http.client)."""

    def __init__(
        self,
        proxy: ProxyProcess,
        session: SessionInfo,
        host: str,
        cafile: Path,
        received: Received,
        port: int = 443,
    ) -> None:
        ctx = ssl.create_default_context(cafile=str(cafile))
        self.conn = http.client.HTTPSConnection(
            proxy.proxy_host, proxy.port, context=ctx, timeout=20
        )
        self.conn.set_tunnel(host, port, headers={"Proxy-Authorization": proxy_auth(session)})
        self.conn.auto_open = 0  # never silently open a second tunnel
        self.received = received
        self.host = host

    def open(self) -> None:
        self.conn.connect()

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        self.conn.request("GET", path, headers=headers or {})
        resp = self.conn.getresponse()
        body = resp.read()
        self.received.add(str(resp.headers).encode())
        self.received.add(body)
        return resp.status, body

    def is_closed_by_peer(self) -> bool:
        """True once the proxy has closed this connection (EOF or reset)."""
        sock = self.conn.sock
        if sock is None:
            return True
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        try:
            data = sock.recv(1)
        except (ssl.SSLError, OSError):
            return True
        if data:
            self.received.add(data)
            return False
        return True

    def close(self) -> None:
        self.conn.close()


def raw_exchange(
    proxy: ProxyProcess, payload: bytes, received: Received, timeout: float = 20
) -> bytes:
    """Send ``payload`` on a fresh connection to the proxy and read until it closes."""
    with socket.create_connection((proxy.proxy_host, proxy.port), timeout=timeout) as s:
        with contextlib.suppress(OSError):
            s.sendall(payload)
        chunks: list[bytes] = []
        while True:
            try:
                data = s.recv(65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    return received.add(b"".join(chunks))


CLOSE = b"Connection: close"


def request_head(method: str, target: str, host: str, *lines: bytes) -> bytes:
    """A raw HTTP/1.1 request head: the request line, ``Host``, then ``lines``
    (whole header lines, in order), as a hostile client writes it."""
    first = f"{method} {target} HTTP/1.1\r\nHost: {host}".encode()
    return b"\r\n".join([first, *lines]) + b"\r\n\r\n"


def send_connect(sock: socket.socket, auth: bytes, host: str = "other.test") -> bytes:
    """Send a CONNECT for ``host``:443 with ``auth`` as Proxy-Authorization; the answer's head."""
    target = f"{host}:443"
    sock.sendall(request_head("CONNECT", target, target, b"Proxy-Authorization: " + auth))
    return read_head(sock)


def raw_connect(proxy: ProxyProcess, target: str, auth: bytes, received: Received) -> bytes:
    """One CONNECT for ``target`` (``host:port``) with ``auth``, on a connection of its
    own: everything the proxy answered before it closed."""
    head = request_head("CONNECT", target, target, b"Proxy-Authorization: " + auth, CLOSE)
    return raw_exchange(proxy, head, received)


def status_of(response: bytes) -> int:
    parts = response.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


@dataclass
class FaultyProxy(ProxyProcess):
    """airlock-proxy run through ``faulty_proxy.py``, which breaks a concern on purpose
    (``fault`` names which; see that file)."""

    fault: str = ""

    def argv(self) -> list[str]:
        argv = super().argv()
        return [sys.executable, str(FAULTY_PROXY), self.fault, *argv[1:]]
