"""Attack: reach internal addresses through IPv6 forms that embed IPv4, and
private IPv6 ranges (issue item 8); plain http to an intercepted host must be
refused before any DNS lookup ("also seen").

Loopback only: every probe here is refused by the classification before the
proxy opens any connection (the answer names ``destination_refused``, the
egress decision that precedes dialling), so no packet leaves this host.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.fakes.proxy_harness import ProxyProcess, proxy_process
from tests.proxy.adversarial.ops_fixtures import (
    CLOSE,
    Received,
    assert_no_token,
    placeholder,
    proxy_auth,
    raw_connect,
    raw_exchange,
    real_token,
    request_head,
    status_of,
)
from tests.proxy.helpers import api_rule

pytestmark = pytest.mark.timeout(180)

RECEIVED = Received()

# (address, what it reaches)
REFUSED = [
    ("::ffff:10.0.0.1", "IPv4-mapped private"),
    ("::ffff:169.254.169.254", "IPv4-mapped metadata"),
    ("::10.0.0.1", "IPv4-compatible ::/96"),
    ("::127.0.0.1", "IPv4-compatible loopback"),
    ("::ffff:0:10.0.0.1", "IPv4-translated"),
    ("64:ff9b::10.0.0.1", "NAT64 /96 to private"),
    ("64:ff9b::169.254.169.254", "NAT64 /96 to metadata"),
    ("64:ff9b::127.0.0.1", "NAT64 /96 to loopback"),
    ("64:ff9b:1::a00:1", "local-use NAT64 /48"),
    ("2002:a00:1::1", "6to4 of 10.0.0.1"),
    ("2002:a9fe:a9fe::1", "6to4 of 169.254.169.254"),
    ("2002:7f00:1::1", "6to4 of 127.0.0.1"),
    ("2001:0:a00:1::f5ff:fffe", "Teredo, server 10.0.0.1"),
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "Teredo, client 10.0.0.1"),
    ("fec0::1", "site-local"),
    ("fc00::1", "unique local"),
    ("fd12:3456::1", "unique local"),
    ("fd00:ec2::254", "metadata"),
    ("fe80::1", "link-local"),
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("ff02::1", "multicast"),
    ("10.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "CGNAT"),
    ("169.254.169.254", "metadata"),
    ("127.0.0.1", "loopback"),
    ("0.0.0.0", "unspecified"),
    ("240.0.0.1", "reserved"),
]


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    # "localhost" is intercepted: if the proxy looked it up before refusing
    # plain http, /etc/hosts would answer 127.0.0.1 and the refusal would be
    # destination_refused, not plain_http_intercepted (and no packet leaves).
    with proxy_process(
        tmp_path_factory.mktemp("ssrf"), intercept=["localhost", "api.github.com"]
    ) as p:
        yield p


TOKEN = real_token()
PLACEHOLDER = placeholder()


@pytest.fixture(scope="module")
def auth(proxy: ProxyProcess) -> bytes:
    """A session that may go anywhere, holding a lease with a real token."""

    async def create() -> bytes:
        async with proxy.client() as client:
            info = await client.create_session(allow=["*"], ttl_s=600)
            await client.put_lease(info.session_id, "l", [api_rule(PLACEHOLDER, TOKEN)], ttl_s=600)
        return proxy_auth(info).encode()

    return asyncio.run(create())


def _literal(addr: str) -> str:
    return f"[{addr}]" if ":" in addr else addr


def _refusal(response: bytes) -> bytes:
    head = response.split(b"\r\n\r\n", 1)[0].lower()
    for line in head.split(b"\r\n"):
        if line.startswith(b"x-airlock-refusal:"):
            return line.split(b":", 1)[1].strip()
    return b""


@pytest.mark.parametrize(("addr", "what"), REFUSED, ids=[w for _, w in REFUSED])
def test_connect_to_internal_address_is_refused_before_dialling(
    proxy: ProxyProcess, auth: bytes, addr: str, what: str
) -> None:
    response = raw_connect(proxy, f"{_literal(addr)}:443", auth, RECEIVED)
    assert status_of(response) == 403, what
    assert _refusal(response) in (b"destination_refused", b"control_api"), what


@pytest.mark.parametrize(("addr", "what"), REFUSED, ids=[w for _, w in REFUSED])
def test_plain_http_to_internal_address_is_refused_before_dialling(
    proxy: ProxyProcess, auth: bytes, addr: str, what: str
) -> None:
    host = _literal(addr)
    response = raw_exchange(
        proxy,
        request_head(
            "GET",
            f"http://{host}/latest/meta-data/",
            host,
            b"Authorization: token " + PLACEHOLDER.encode(),
            b"Proxy-Authorization: " + auth,
            CLOSE,
        ),
        RECEIVED,
    )
    assert status_of(response) == 403, what
    assert _refusal(response) in (b"destination_refused", b"control_api"), what


def test_plain_http_to_intercepted_host_is_refused_before_dns(
    proxy: ProxyProcess, auth: bytes
) -> None:
    response = raw_exchange(
        proxy,
        request_head(
            "GET", "http://localhost/", "localhost", b"Proxy-Authorization: " + auth, CLOSE
        ),
        RECEIVED,
    )
    assert status_of(response) == 403
    assert _refusal(response) == b"plain_http_intercepted"
    assert b"https://localhost/" in response  # says what to do instead


def test_zz_nothing_leaked(proxy: ProxyProcess) -> None:
    events = proxy.wait_audit(
        lambda e: e.get("reason") == "destination_refused",
        count=2 * (len(REFUSED) - 4),
        what="every destination_refused line",
    )
    assert sum(1 for e in events if e.get("reason") == "destination_refused") >= 2 * (
        len(REFUSED) - 4
    )
    assert_no_token([TOKEN], RECEIVED.blobs, proxy.written_files())
