"""With a scrubbing hook switched off, the guard alone keeps the token from the sandbox.

Each case runs a real airlock-proxy through ``faulty_proxy.py`` with one
scrubbing hook switched off (a test double of a hook that misses a path),
in front of the reflector, and asks for the route that hook would have
scrubbed. The connection-level guard must close the tunnel before any form
of the token reaches the client, and audit it as ``guard``; nothing the
proxy wrote may carry the token either.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import wsproto
import wsproto.events

from tests.fakes.reflector import Reflector
from tests.fakes.tls import TestCA
from tests.proxy.adversarial.conftest import (
    BIG,
    H1_ONLY,
    Lease,
    h1_get,
    h2_get,
    open_lease,
    open_tunnel,
    read_all,
    reflector_resolve,
    written_leaks,
    ws_request,
)
from tests.proxy.adversarial.ops_fixtures import FaultyProxy

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def faulty(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    upstream_ca: TestCA,
    upstream: Reflector,
    upstream_h1: Reflector,
) -> Iterator[Lease]:
    """A proxy with the hooks named by the test's ``hooks`` parameter off, and a lease."""
    hooks: str = request.param
    proc = FaultyProxy(
        tmp_path / "proxy",
        resolve=reflector_resolve(upstream, upstream_h1),
        upstream_ca=upstream_ca.ca_path,
        fault=f"unscrubbed:{hooks}",
    )
    proc.start()
    try:
        lease = open_lease(proc, ttl_s=600)
        yield lease
        assert written_leaks(proc, [lease.real]) == []
    finally:
        proc.stop()


def guarded(lease: Lease) -> list[dict[str, object]]:
    """The guard's audit lines, once the proxy has written the first one."""
    lines = lease.proxy.wait_audit(lambda e: e["event"] == "guard", what="the guard's audit line")
    return [e for e in lines if e["event"] == "guard"]


CASES = [
    ("headers", "h1", "/header", "api.github.com"),
    ("headers", "h2", "/header", "api.github.com"),
    ("headers", "h1", f"/body?size={BIG}&framing=chunked&chunk=65536", "api.github.com"),
    ("headers", "h2", f"/body?size={BIG}&framing=cl&chunk=65536", "api.github.com"),
    ("response", "h1", "/body?size=300000&framing=cl&chunk=4093", "api.github.com"),
    ("response", "h2", "/body?size=300000&framing=cl&chunk=4093", "api.github.com"),
    ("hints", "h1", "/early", H1_ONLY),
    ("headers", "h1", "/reason", "api.github.com"),
    ("headers,response", "h1", "/body?size=300000&framing=close&chunk=4093", "api.github.com"),
]


@pytest.mark.parametrize(
    ("faulty", "via", "path", "host"), CASES, indirect=["faulty"], ids=[str(c) for c in CASES]
)
def test_guard_alone_keeps_the_token_out(faulty: Lease, via: str, path: str, host: str) -> None:
    get = h1_get if via == "h1" else h2_get
    resp = get(faulty, path, host=host)
    assert faulty.leaks(resp.everything) == []
    events = guarded(faulty)
    assert events and events[0]["reason"] == "token", events
    assert events[0]["host"] == host


@pytest.mark.parametrize("faulty", ["websocket", "control"], indirect=True)
def test_guard_alone_keeps_the_token_out_of_websocket_frames(faulty: Lease) -> None:
    sock = open_tunnel(faulty)
    ws = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
    with sock:
        sock.sendall(ws_request(ws, faulty.authorization))
        raw = read_all(sock)  # the reflector sends its frames at once; the guard closes
    assert faulty.leaks(raw) == []
    assert b"101" in raw.split(b"\r\n", 1)[0]  # the upgrade itself went through
    events = guarded(faulty)
    assert events and events[0]["reason"] == "token", events
