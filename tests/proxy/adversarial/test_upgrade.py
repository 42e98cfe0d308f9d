"""A 101 to anything but a WebSocket is refused on intercepted hosts (item 6).

mitmproxy would relay such a connection as raw TCP, where nothing is
scrubbed; the reflector switches to a made-up protocol and then streams the
swapped value.
"""

from __future__ import annotations

import json

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.reflector import Reflector
from tests.proxy.adversarial.conftest import Lease, h1_get, nothing_written

pytestmark = pytest.mark.timeout(120)


def test_non_websocket_upgrade_is_refused(lease: Lease, upstream: Reflector) -> None:
    resp = h1_get(lease, "/upgrade", headers={"Upgrade": "reflect", "Connection": "Upgrade"})
    assert upstream.last("/upgrade").auth == f"Bearer {lease.real}"
    assert lease.leaks(resp.everything) == []
    assert resp.status == 502, resp.head
    assert json.loads(resp.body)["error"]["code"] == "upgrade_refused"


def test_zz_nothing_written_contains_a_real_token(proxy: ProxyProcess) -> None:
    nothing_written(proxy)
