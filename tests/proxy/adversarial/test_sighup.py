"""Operations: SIGHUP used to kill the proxy silently ("also seen").

``logrotate`` renames the audit log and sends SIGHUP: the proxy must stay up,
write new lines to a fresh file at the configured path, and pick up a rotated
control token from ``--control-token-file``.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.wait import wait_until_sync
from tests.proxy.adversarial.ops_fixtures import OpsProxy, Seen, Tunnel, leased_session

pytestmark = pytest.mark.timeout(120)

SEEN = Seen()


@pytest.fixture(scope="module")
def proxy(ops_proxy: OpsProxy) -> Iterator[ProxyProcess]:
    with ops_proxy("sighup", control_tcp=True) as p:
        yield p


def _hup(proxy: ProxyProcess) -> None:
    assert proxy.process is not None
    os.kill(proxy.process.pid, signal.SIGHUP)


async def test_sighup_reopens_the_audit_log_and_keeps_serving(proxy: ProxyProcess) -> None:
    info, ph, _ = await leased_session(proxy, SEEN)
    rotated = proxy.audit_log.with_suffix(".log.1")
    wait_until_sync(
        lambda: "lease_created" in proxy.audit_log.read_text(),
        message="timed out waiting for first lines",
    )
    os.rename(proxy.audit_log, rotated)
    _hup(proxy)
    wait_until_sync(
        proxy.audit_log.exists, message="timed out waiting for a fresh audit log after SIGHUP"
    )
    wait_until_sync(
        lambda: '"event":"reload"' in proxy.audit_log.read_text(),
        message="timed out waiting for reload line",
    )
    before = rotated.read_text()

    tunnel = Tunnel(proxy, info, "api.github.com", proxy.ca_path, SEEN)
    tunnel.open()
    status, body = tunnel.get("/after-rotation", {"authorization": f"token {ph}"})
    tunnel.close()
    assert status == 200 and ph.encode() in body
    wait_until_sync(
        lambda: '"event":"swap"' in proxy.audit_log.read_text(),
        message="timed out waiting for swap line",
    )
    assert rotated.read_text() == before  # nothing more went to the rotated file
    assert proxy.process is not None and proxy.process.poll() is None
    assert "SIGHUP" in proxy.log_path.read_text()
    SEEN.assert_clean([rotated, *proxy.written_files()])


async def test_sighup_rereads_the_control_token(proxy: ProxyProcess) -> None:
    token_file = proxy.tmp_dir / "control-token"
    old = proxy.control_token
    new = os.urandom(16).hex()
    token_file.write_text(new)
    _hup(proxy)
    url = f"http://127.0.0.1:{proxy.control_port}/v1/sessions/nope"

    def status_with(token: str | None) -> int:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.get(url, headers=headers, timeout=10).status_code

    wait_until_sync(
        lambda: status_with(new) == 404, message="timed out waiting for the new token accepted"
    )
    assert status_with(old) == 401
    # An empty token file is refused and the current token kept.
    token_file.write_text("")
    _hup(proxy)
    wait_until_sync(
        lambda: "keeping the old control token" in proxy.log_path.read_text(),
        message="timed out waiting for the refused re-read logged",
    )
    assert status_with(new) == 404
    assert proxy.process is not None and proxy.process.poll() is None
    proxy.control_token = new  # for the harness's stop/health
