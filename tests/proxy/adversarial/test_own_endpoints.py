"""Attack: reach the control API, or loop into the proxy itself, through an
operator ``--resolve`` entry written in another spelling of the same socket
address (issue item 12): ``[::ffff:127.0.0.1]:PORT``, ``0.0.0.0:PORT``,
``[::]:PORT``. Own endpoints are compared as socket addresses, so every
spelling is refused at CONNECT, before any connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.fakes.net import free_port
from tests.fakes.proxy_harness import ProxyProcess, proxy_process
from tests.proxy.adversarial.ops_fixtures import (
    CLOSE,
    Received,
    assert_no_token,
    proxy_auth,
    raw_connect,
    raw_exchange,
    request_head,
    status_of,
)

pytestmark = pytest.mark.timeout(180)

RECEIVED = Received()
CONTROL_PORT = free_port()
PROXY_PORT = free_port()

SPELLINGS = {
    "ctl-mapped.test": f"[::ffff:127.0.0.1]:{CONTROL_PORT}",
    "ctl-any4.test": f"0.0.0.0:{CONTROL_PORT}",
    "ctl-any6.test": f"[::]:{CONTROL_PORT}",
    "ctl-plain.test": f"127.0.0.1:{CONTROL_PORT}",
    "loop-mapped.test": f"[::ffff:127.0.0.1]:{PROXY_PORT}",
    "loop-any4.test": f"0.0.0.0:{PROXY_PORT}",
    "loop-any6.test": f"[::]:{PROXY_PORT}",
    "loop-plain.test": f"127.0.0.1:{PROXY_PORT}",
}


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    resolve = []
    for host, target in SPELLINGS.items():
        resolve += [f"{host}:443:{target}", f"{host}:80:{target}"]
    with proxy_process(
        tmp_path_factory.mktemp("own"),
        resolve=resolve,
        control_tcp=True,
        port=PROXY_PORT,
        control_port=CONTROL_PORT,
    ) as p:
        yield p


@pytest.fixture(scope="module")
def auth(proxy: ProxyProcess) -> bytes:
    async def create() -> bytes:
        async with proxy.client() as client:
            info = await client.create_session(allow=["*"], ttl_s=600)
        return proxy_auth(info).encode()

    return asyncio.run(create())


@pytest.mark.parametrize("host", sorted(SPELLINGS))
def test_connect_to_own_endpoint_in_any_spelling_is_refused(
    proxy: ProxyProcess, auth: bytes, host: str
) -> None:
    response = raw_connect(proxy, f"{host}:443", auth, RECEIVED)
    assert status_of(response) == 403
    assert b"control_api" in response


@pytest.mark.parametrize("host", sorted(SPELLINGS))
def test_plain_http_to_own_endpoint_in_any_spelling_is_refused(
    proxy: ProxyProcess, auth: bytes, host: str
) -> None:
    response = raw_exchange(
        proxy,
        request_head(
            "GET", f"http://{host}/v1/sessions", host, b"Proxy-Authorization: " + auth, CLOSE
        ),
        RECEIVED,
    )
    assert status_of(response) == 403
    assert b"control_api" in response
    # The control API never answered: no session listing, no bearer challenge.
    assert b"session_id" not in response and b"unauthorized" not in response


def test_zz_control_token_never_reached_the_client(proxy: ProxyProcess) -> None:
    assert proxy.control_token
    assert_no_token([proxy.control_token], RECEIVED.blobs, [proxy.audit_log, proxy.log_path])
