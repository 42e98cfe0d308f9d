"""The proxy control API's own OpenAPI document, and schemathesis fuzzing it against a live proxy.

Every route, valid and invalid input, without a token and with the control
token: no 5xx, and every status, content type and body is the one the
document lists.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from airlock import __version__
from airlock.proxy.control import ControlAPI
from tests.fakes.fuzz import run_schemathesis
from tests.fakes.proxy_harness import ProxyProcess, proxy_process

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    with proxy_process(tmp_path_factory.mktemp("fuzz"), control_tcp=True) as p:
        yield p


def _base(proxy: ProxyProcess) -> str:
    return "http://" + proxy.control[len("tcp://") :]


async def _document(proxy: ProxyProcess) -> tuple[int, dict[str, object]]:
    headers = {"Authorization": f"Bearer {proxy.control_token}"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{_base(proxy)}/v1/openapi.json", headers=headers) as resp,
    ):
        return resp.status, await resp.json()


async def test_the_document_lists_every_route_and_status(proxy: ProxyProcess) -> None:
    status, document = await _document(proxy)
    assert status == 200
    assert document["openapi"] == "3.1.0"
    assert document["info"] == {"title": "airlock-proxy control API", "version": __version__}
    paths = document["paths"]
    assert isinstance(paths, dict)
    # Every route the app serves is in the document, with the same methods.
    app = ControlAPI.__new__(ControlAPI)
    app._token = None
    served: dict[str, set[str]] = {}
    for route in app.app().router.routes():
        if route.method != "HEAD":
            served.setdefault(route.resource.canonical, set()).add(route.method.lower())  # type: ignore[union-attr]
    documented = {path: {m for m in ops if m != "parameters"} for path, ops in paths.items()}
    assert documented == served
    for path, ops in paths.items():
        for method, op in ops.items():
            if method == "parameters":
                continue
            if path != "/v1/health":
                assert "401" in op["responses"], (method, path)
            if method in ("post", "put"):
                assert {"400", "413"} <= set(op["responses"]), (method, path)
    # Without a token the document is refused like every other route but health.
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{_base(proxy)}/v1/openapi.json") as resp,
    ):
        assert resp.status == 401
        assert (await resp.json())["error"]["code"] == "unauthorized"


async def test_schemathesis_finds_nothing(proxy: ProxyProcess, tmp_path: Path) -> None:
    _, document = await _document(proxy)
    # The events long polls may wait up to a minute for a first event; fuzzed with a short
    # wait so every example answers within the request timeout (the bound itself is
    # checked by the document test and the events tests).
    fuzzed = json.loads(json.dumps(document))
    for route in ("/v1/events", "/v1/sessions/{sid}/events"):
        for parameter in fuzzed["paths"][route]["parameters"]:
            if parameter["name"] == "wait_s":
                parameter["schema"]["maximum"] = 0.05
    for token, label in ((None, "proxy-no-token"), (proxy.control_token, "proxy-token")):
        run_schemathesis(fuzzed, _base(proxy), tmp_path, token=token, label=label)
    assert proxy.process is not None and proxy.process.poll() is None
    # No handler of ours failed. (aiohttp's own parser logs a traceback for the probe's
    # NUL header value before any handler runs; the client gets its 400.)
    log = proxy.log_path.read_text()
    ours = [line for line in log.splitlines() if " ERROR airlock" in line]
    assert not ours, ours[:5]
    assert "internal" not in {
        e.get("reason") for e in proxy.audit_events() if e["event"] == "addon_error"
    }
