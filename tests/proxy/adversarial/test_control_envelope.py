"""Malformed bodies on the control API get the JSON envelope (issue 22).

Deeply nested JSON used to exhaust the decoder's stack: aiohttp answered its
own text/plain 500 and logged a traceback. Every route, with every method it
serves, now answers such a body with ``{"error": {"code", "message"}}`` (or
ignores the body, for routes that read none), never a 5xx, and the proxy's
log holds no traceback.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.proxy_harness import ProxyProcess, running_proxy

pytestmark = pytest.mark.timeout(120)

ROUTES = [
    ("GET", "/v1/health"),
    ("GET", "/v1/ca.pem"),
    ("GET", "/metrics"),
    ("POST", "/v1/sessions"),
    ("GET", "/v1/sessions/s1"),
    ("DELETE", "/v1/sessions/s1"),
    ("GET", "/v1/sessions/s1/leases"),
    ("PUT", "/v1/sessions/s1/leases/l1"),
    ("DELETE", "/v1/sessions/s1/leases/l1"),
]
DEEP = {
    "arrays": b"[" * 200_000 + b"]" * 200_000,
    "objects": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "unclosed": b"[" * 500_000,
    "in_a_field": b'{"allow": ' + b"[" * 100_000 + b"]" * 100_000 + b', "ttl_s": 60}',
}


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[ProxyProcess]:
    async with running_proxy(tmp_path, control_tcp=True) as p:
        yield p


async def test_deep_json_gets_the_envelope_on_every_route(proxy: ProxyProcess) -> None:
    base = "http://" + proxy.control.removeprefix("tcp://")
    headers = {
        "authorization": f"Bearer {proxy.control_token}",
        "content-type": "application/json",
    }
    async with aiohttp.ClientSession() as http:
        async with http.post(
            base + "/v1/sessions",
            json={"session_id": "s1", "allow": [], "ttl_s": 60},
            headers=headers,
        ) as resp:
            assert resp.status == 201
        for name, body in DEEP.items():
            for method, route in ROUTES:
                async with http.request(method, base + route, data=body, headers=headers) as resp:
                    what = f"{method} {route} with {name}"
                    assert resp.status < 500, what
                    if method in ("POST", "PUT"):  # these read the body
                        assert resp.status == 400, what
                        assert resp.content_type == "application/json", what
                        error = (await resp.json())["error"]
                        assert error["code"] == "invalid_request", what
                        assert "nests too deeply" in error["message"] or "JSON" in error["message"]
                    else:
                        await resp.read()
        async with http.get(base + "/v1/health", headers=headers) as resp:
            assert resp.status == 200  # still serving
    log = proxy.log_path.read_text()
    assert "Traceback" not in log, log[-3000:]
    assert "RecursionError" not in log
