"""Attack surface: a bug in one concern must not become a leak ("also seen":
chain.py had no fail-closed path and dropped unknown hooks silently).

A real airlock-proxy with concerns broken on purpose (``faulty_proxy.py``):
an exception after the swap answers 502 with airlock's JSON body and the
upstream never sees the swapped request; an exception while handling the
response answers 502 and the upstream's body (which echoes the real token)
never reaches the client; each is audited as ``addon_error``; the proxy keeps
serving. A misspelt hook stops the proxy at start-up with one line, exit 2.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.upstream import EchoUpstream
from tests.fakes.wait import wait_until_sync
from tests.proxy.adversarial.ops_fixtures import FaultyProxy, OpsProxy, Seen, Tunnel, leased_session

pytestmark = pytest.mark.timeout(180)

SEEN = Seen()


@pytest.fixture(scope="module")
def proxy(ops_proxy: OpsProxy) -> Iterator[ProxyProcess]:
    with ops_proxy("faulty", process=FaultyProxy, fault="raise") as p:
        yield p


def _error_code(body: bytes) -> str:
    return str(json.loads(body)["error"]["code"])


async def test_exception_after_the_swap_is_502_and_nothing_goes_upstream(
    proxy: ProxyProcess, ops_github: EchoUpstream
) -> None:
    info, ph, _ = await leased_session(proxy, SEEN, ttl_s=120)
    ops_github.clear()
    tunnel = Tunnel(proxy, info, "api.github.com", proxy.ca_path, SEEN)
    tunnel.open()
    status, body = tunnel.get("/raise-request", {"authorization": f"token {ph}"})
    tunnel.close()
    assert status == 502
    assert _error_code(body) == "addon_error"
    assert [r.path for r in ops_github.requests] == []


@pytest.mark.parametrize("path", ["/raise-headers", "/raise-response"])
async def test_exception_on_the_response_is_502_and_the_body_never_arrives(
    proxy: ProxyProcess, ops_github: EchoUpstream, path: str
) -> None:
    info, ph, _ = await leased_session(proxy, SEEN, ttl_s=120)
    tunnel = Tunnel(proxy, info, "api.github.com", proxy.ca_path, SEEN)
    tunnel.open()
    status, body = tunnel.get(path, {"authorization": f"token {ph}"})
    tunnel.close()
    assert status == 502
    assert _error_code(body) == "addon_error"
    assert b"authorization" not in body  # the echo body was replaced whole
    assert ops_github.last().path == path  # the upstream did answer, with the token echoed


async def test_proxy_keeps_serving_and_audits_addon_errors(
    proxy: ProxyProcess, ops_github: EchoUpstream
) -> None:
    info, ph, _ = await leased_session(proxy, SEEN, ttl_s=120)
    tunnel = Tunnel(proxy, info, "api.github.com", proxy.ca_path, SEEN)
    tunnel.open()
    status, body = tunnel.get("/fine", {"authorization": f"token {ph}"})
    tunnel.close()
    assert status == 200 and ph.encode() in body
    expected = {("Swap", "requestheaders"), ("Scrub", "responseheaders"), ("Scrub", "response")}

    def failed_hooks() -> set[tuple[object, object]]:
        return {
            (e["concern"], e["hook"]) for e in proxy.audit_events() if e["event"] == "addon_error"
        }

    wait_until_sync(lambda: failed_hooks() >= expected, message="addon_error lines missing")
    errors = [e for e in proxy.audit_events() if e["event"] == "addon_error"]
    assert {(e["concern"], e["hook"]) for e in errors} >= expected
    assert all(e["error"] == "RuntimeError" for e in errors)
    assert proxy.process is not None and proxy.process.poll() is None


def test_misspelt_hook_is_a_startup_error(tmp_path: Path) -> None:
    proc = FaultyProxy(tmp_path, fault="typo")
    with pytest.raises(RuntimeError, match="did not become healthy"):
        proc.start(timeout_s=30)
    assert proc.process is not None and proc.process.returncode == 2
    lines = proc.log_path.read_text().strip().splitlines()
    assert len(lines) == 1 and "request_headers is not a mitmproxy hook" in lines[0]


def test_zz_no_real_token_anywhere(proxy: ProxyProcess) -> None:
    assert len(SEEN.tokens) >= 3
    SEEN.assert_clean(proxy.written_files())
