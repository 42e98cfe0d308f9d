"""The swap, end to end: real proxy, real TLS upstream, real clients.

Clients are configured as a sandbox would be: ``HTTPS_PROXY`` with the session's
credentials and the proxy's CA trusted. The last test greps everything the
proxy wrote for every real token used in this module.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest

from airlock.client.proxy import ProxyClient
from airlock.proxy.protocol import SessionInfo
from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.upstream import EchoUpstream
from tests.proxy.conftest import ProxyFactory
from tests.proxy.helpers import (
    api_rule,
    basic,
    curl,
    git_rule,
    real_token,
    run,
)
from tests.proxy.helpers import placeholder as new_placeholder

pytestmark = pytest.mark.timeout(120)

USED_TOKENS: list[str] = []
USED_PLACEHOLDERS: list[str] = []


def token(length: int = 40) -> str:
    t = real_token(length)
    USED_TOKENS.append(t)
    return t


def placeholder() -> str:
    ph = new_placeholder()
    USED_PLACEHOLDERS.append(ph)
    return ph


@pytest.fixture(scope="module")
def proxy(start_proxy: ProxyFactory) -> Iterator[ProxyProcess]:
    with start_proxy("swap") as p:
        yield p


Rule = Callable[[str, str], dict[str, Any]]


@dataclass
class Sandbox:
    proxy: ProxyProcess
    client: ProxyClient
    session: SessionInfo
    env: dict[str, str]

    @property
    def sid(self) -> str:
        return self.session.session_id

    @property
    def proxy_url(self) -> str:
        return self.proxy.proxy_url(self.session)

    async def get_with(self, ph: str, url: str) -> tuple[int, str, str]:
        """curl ``url`` through the proxy with ``Authorization: token <ph>``."""
        return await curl(self.env, "-H", f"Authorization: token {ph}", url)

    async def lease(self, rule: Rule = api_rule) -> tuple[str, str]:
        """A new placeholder and real token (both remembered), leased here as ``l1``."""
        ph, real = placeholder(), token()
        await self.client.put_lease(self.sid, "l1", [rule(ph, real)], ttl_s=60)
        return ph, real


ALLOW = ["api.github.com", "github.com", "api.vercel.com", "other.test", "plain.test"]


@pytest.fixture
async def sandbox(proxy: ProxyProcess) -> AsyncIterator[Sandbox]:
    async with proxy.client() as client:
        session = await client.create_session(allow=ALLOW, ttl_s=600)
        yield Sandbox(proxy, client, session, proxy.client_env(session))
        await client.delete_session(session.session_id)


# --- swaps -----------------------------------------------------------------


async def test_token_placeholder_arrives_as_bearer_real(
    sandbox: Sandbox, github: EchoUpstream
) -> None:
    ph, real = await sandbox.lease()
    status, body, err = await sandbox.get_with(ph, "https://api.github.com/user")
    assert status == 200, err
    assert github.last().one("authorization") == f"Bearer {real}"
    assert real not in body


async def test_bearer_placeholder_python_http_client(
    sandbox: Sandbox, github: EchoUpstream
) -> None:
    """Python's http.client through a CONNECT tunnel; scheme is case-insensitive."""
    ph, real = await sandbox.lease()

    def call() -> tuple[int, bytes]:
        ctx = ssl.create_default_context(cafile=str(sandbox.proxy.ca_path))
        conn = http.client.HTTPSConnection("127.0.0.1", sandbox.proxy.port, context=ctx, timeout=20)
        creds = base64.b64encode(f"{sandbox.sid}:{_secret(sandbox)}".encode()).decode()
        conn.set_tunnel("api.github.com", 443, headers={"Proxy-Authorization": f"Basic {creds}"})
        conn.request("GET", "/repos/o/r", headers={"Authorization": f"bEaReR {ph}"})
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, data

    status, data = await asyncio.to_thread(call)
    assert status == 200
    assert github.last().one("authorization") == f"Bearer {real}"
    assert real.encode() not in data


def _secret(sandbox: Sandbox) -> str:
    from urllib.parse import urlsplit

    secret = urlsplit(sandbox.session.proxy_url).password
    assert secret
    return secret


async def test_git_fetch_basic_placeholder(
    sandbox: Sandbox, github: EchoUpstream, tmp_path: Path
) -> None:
    ph, real = await sandbox.lease(git_rule)
    repo = tmp_path / "repo"
    env = sandbox.env
    await run(["git", "init", "-q", str(repo)], env)
    await run(
        ["git", "-C", str(repo), "remote", "add", "origin", "https://github.com/o/r.git"], env
    )
    github.clear()
    await run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            f"http.extraheader=Authorization: {basic('x-access-token', ph)}",
            "fetch",
            "origin",
        ],
        env,
    )
    seen = [r for r in github.requests if "info/refs" in r.path]
    assert seen, "git never reached the upstream"
    assert seen[0].one("authorization") == basic("x-access-token", real)


async def test_http2_clients_are_answered_in_http1(sandbox: Sandbox, github: EchoUpstream) -> None:
    """curl --http2 and httpx(http2=True) offer HTTP/2; an intercepted tunnel
    speaks HTTP/1.1 to the sandbox (the connection-level guard parses one
    framing), and both clients work all the same.
    """
    ph, real = await sandbox.lease()
    result = await run(
        [
            "curl", "-sS", "--http2", "-o", "/dev/null", "-w", "%{http_version} %{http_code}",
            "-H", f"Authorization: token {ph}", "https://api.github.com/h2",
        ],
        sandbox.env,
    )  # fmt: skip
    assert result.stdout == "1.1 200", result.stderr
    assert github.last().one("authorization") == f"Bearer {real}"

    ctx = ssl.create_default_context(cafile=str(sandbox.proxy.ca_path))
    async with httpx.AsyncClient(http2=True, proxy=sandbox.proxy_url, verify=ctx) as client:
        resp = await client.get(
            "https://api.github.com/user", headers={"authorization": f"token {ph}"}
        )
        again = await client.get(
            "https://api.github.com/user2", headers={"authorization": f"Bearer {ph}"}
        )
    assert resp.status_code == 200 and again.status_code == 200
    assert resp.http_version == "HTTP/1.1"
    assert github.last().one("authorization") == f"Bearer {real}"
    assert real not in resp.text


async def test_websocket_upgrade_carries_swapped_header(
    sandbox: Sandbox, github: EchoUpstream
) -> None:
    ph, real = await sandbox.lease()
    ctx = ssl.create_default_context(cafile=str(sandbox.proxy.ca_path))
    async with aiohttp.ClientSession() as http_session:
        ws = await http_session.ws_connect(
            "wss://api.github.com/ws",
            proxy=f"http://127.0.0.1:{sandbox.proxy.port}",
            proxy_headers={
                "Proxy-Authorization": aiohttp.encode_basic_auth(sandbox.sid, _secret(sandbox))
            },
            ssl=ctx,
            headers={"Authorization": f"token {ph}"},
        )
        first = await ws.receive_str()
        await ws.send_str("ping")
        echo = await ws.receive_str()
        await ws.close()
    upgrade = [r for r in github.requests if r.path == "/ws"][-1]
    assert upgrade.one("authorization") == f"Bearer {real}"
    # The echo of the real header is scrubbed on its way back.
    assert real not in first
    assert json.loads(first)["authorization"] == [f"Bearer {ph}"]
    assert echo == "ping"


async def test_tokens_of_any_length_and_crlf_stripped(
    sandbox: Sandbox, github: EchoUpstream
) -> None:
    ph, real = placeholder(), token(3000)
    await sandbox.client.put_lease(sandbox.sid, "l1", [api_rule(ph, real)], ttl_s=60)
    status, _, err = await sandbox.get_with(ph, "https://api.github.com/x")
    assert status == 200, err
    assert github.last().one("authorization") == f"Bearer {real}"

    ph2, real2 = placeholder(), token()
    rule = api_rule(ph2, f"{real2}\r\nX-Injected: yes")
    await sandbox.client.put_lease(sandbox.sid, "l2", [rule], ttl_s=60)
    status, _, err = await curl(
        sandbox.env, "-H", f"Authorization: token {ph2}", "https://api.github.com/y"
    )
    assert status == 200, err
    seen = github.last()
    assert seen.one("authorization") == f"Bearer {real2}X-Injected: yes"
    assert seen.all("x-injected") == []


# --- response scrubbing ------------------------------------------------------


async def test_upstream_echo_is_scrubbed_in_headers_and_bodies(
    sandbox: Sandbox, github: EchoUpstream
) -> None:
    ph, real = await sandbox.lease()
    for query in ("", "?gzip=1"):
        result = await run(
            [
                "curl", "-sS", "-i", "--compressed",
                "-H", f"Authorization: token {ph}",
                f"https://api.github.com/echo{query}",
            ],
            sandbox.env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert github.last().one("authorization") == f"Bearer {real}"
        assert real not in result.stdout
        assert f"x-echo-authorization: Bearer {ph}" in result.stdout
        assert f'"Bearer {ph}"' in result.stdout


async def test_basic_echo_is_scrubbed(sandbox: Sandbox, github: EchoUpstream) -> None:
    ph, real = await sandbox.lease(git_rule)
    result = await run(
        [
            "curl",
            "-sS",
            "-i",
            "-H",
            f"Authorization: {basic('x-access-token', ph)}",
            "https://github.com/o/r.git/info/refs",
        ],
        sandbox.env,
    )
    assert github.last().one("authorization") == basic("x-access-token", real)
    assert basic("x-access-token", real).split()[1] not in result.stdout
    assert basic("x-access-token", ph).split()[1] in result.stdout


@pytest.mark.parametrize("version", ["--http1.1", "--http2"])
async def test_large_streamed_body_is_scrubbed(
    sandbox: Sandbox, github: EchoUpstream, version: str
) -> None:
    """A body over the streaming threshold, with the token at every chunk offset."""
    ph, real = await sandbox.lease()
    size = 6 * 1024 * 1024
    result = await asyncio.to_thread(
        subprocess.run,
        [
            "curl",
            "-sS",
            "-H",
            f"Authorization: token {ph}",
            f"https://api.github.com/big?big={size}",
        ],
        env=sandbox.env,
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert github.last().one("authorization") == f"Bearer {real}"
    assert real.encode() not in result.stdout
    assert result.stdout.count(f"Bearer {ph}".encode()) > 5000


# --- no swap ------------------------------------------------------------------


async def test_no_lease_no_swap(sandbox: Sandbox, github: EchoUpstream) -> None:
    ph = placeholder()
    status, _, _ = await sandbox.get_with(ph, "https://api.github.com/a")
    assert status == 200
    assert github.last().one("authorization") == f"token {ph}"


async def test_no_swap_after_delete(sandbox: Sandbox, github: EchoUpstream) -> None:
    ph, _ = await sandbox.lease()
    await sandbox.client.delete_lease(sandbox.sid, "l1")
    await sandbox.client.delete_lease(sandbox.sid, "l1")  # idempotent
    assert await sandbox.client.list_leases(sandbox.sid) == []
    status, _, _ = await sandbox.get_with(ph, "https://api.github.com/a")
    assert status == 200
    assert github.last().one("authorization") == f"token {ph}"


async def test_no_swap_after_ttl_expiry(sandbox: Sandbox, github: EchoUpstream) -> None:

    ph, real = placeholder(), token()
    await sandbox.client.put_lease(sandbox.sid, "short", [api_rule(ph, real)], ttl_s=3)
    status, _, _ = await sandbox.get_with(ph, "https://api.github.com/a")
    assert github.last().one("authorization") == f"Bearer {real}"
    # The expiry watcher audits the lease the moment its TTL runs out.
    await sandbox.proxy.await_audit(
        lambda e: e["event"] == "lease_expired" and e.get("session") == sandbox.sid,
        what="lease_expired",
    )
    status, _, _ = await sandbox.get_with(ph, "https://api.github.com/a")
    assert status == 200
    assert github.last().one("authorization") == f"token {ph}"


async def test_other_sessions_placeholder_is_blocked_and_audited(
    sandbox: Sandbox, github: EchoUpstream
) -> None:
    ph, real = placeholder(), token()
    async with sandbox.proxy.client() as client:
        victim = await client.create_session(allow=ALLOW, ttl_s=60)
        await client.put_lease(victim.session_id, "l1", [api_rule(ph, real)], ttl_s=60)
        github.clear()
        status, body, _ = await sandbox.get_with(ph, "https://api.github.com/a")
        await client.delete_session(victim.session_id)
    assert status == 403
    assert "exfiltration" in body
    assert github.requests == []
    await sandbox.proxy.await_audit(
        lambda e: (
            e.get("reason") == "exfiltration_wrong_session" and e.get("session") == sandbox.sid
        ),
    )


async def test_placeholder_to_unleased_host_is_blocked_and_audited(
    sandbox: Sandbox, github: EchoUpstream
) -> None:
    ph, _ = await sandbox.lease()
    github.clear()
    status, _, _ = await sandbox.get_with(ph, "https://api.vercel.com/v2/user")
    assert status == 403
    assert github.requests == []
    await sandbox.proxy.await_audit(
        lambda e: e.get("reason") == "exfiltration_wrong_host" and e.get("session") == sandbox.sid,
    )


async def test_plain_http_is_refused(sandbox: Sandbox, plain: EchoUpstream) -> None:
    ph, _ = await sandbox.lease()
    plain.clear()
    # Plain http to an intercepted host: refused outright.
    status, _, _ = await sandbox.get_with(ph, "http://api.github.com/a")
    assert status == 403
    # Plain http elsewhere works, but never with a known placeholder.
    status, _, _ = await curl(sandbox.env, "http://plain.test/ok")
    assert status == 200
    assert plain.last().path == "/ok"
    assert plain.last().all("proxy-authorization") == []
    status, _, _ = await sandbox.get_with(ph, "http://plain.test/leak")
    assert status == 403
    assert all(r.path != "/leak" for r in plain.requests)


async def test_port_other_than_443_never_swaps(sandbox: Sandbox, github: EchoUpstream) -> None:
    ph, _ = await sandbox.lease()
    github.clear()
    status, _, _ = await sandbox.get_with(ph, "https://api.github.com:8443/a")
    assert status == 403
    assert github.requests == []


async def test_duplicated_authorization_header_is_not_swapped(
    sandbox: Sandbox, github: EchoUpstream
) -> None:
    ph, real = await sandbox.lease()

    def call() -> int:
        ctx = ssl.create_default_context(cafile=str(sandbox.proxy.ca_path))
        conn = http.client.HTTPSConnection("127.0.0.1", sandbox.proxy.port, context=ctx, timeout=20)
        creds = base64.b64encode(f"{sandbox.sid}:{_secret(sandbox)}".encode()).decode()
        conn.set_tunnel("api.github.com", 443, headers={"Proxy-Authorization": f"Basic {creds}"})
        conn.putrequest("GET", "/dup")
        conn.putheader("Authorization", f"token {ph}")
        conn.putheader("Authorization", f"Bearer {ph}")
        conn.endheaders()
        status = conn.getresponse().status
        conn.close()
        return status

    await asyncio.to_thread(call)
    seen = github.last()
    assert seen.path == "/dup"
    assert sorted(seen.all("authorization")) == sorted([f"token {ph}", f"Bearer {ph}"])
    assert real not in json.dumps(seen.headers)


@pytest.mark.parametrize(
    ("rule", "template", "url"),
    [
        *(
            (api_rule, template, "https://api.github.com/c")
            for template in [
                "Bearer x{ph}",
                "token {ph} extra",
                "token {ph}x",
                "Bearerr {ph}",
                "{ph}",
                "Basic-x {ph}",
            ]
        ),
        # Basic whose password has the placeholder as a prefix only.
        (git_rule, "{basic_with_suffix}", "https://github.com/o/r"),
    ],
)
async def test_value_merely_containing_placeholder_is_not_swapped(
    sandbox: Sandbox, github: EchoUpstream, rule: Rule, template: str, url: str
) -> None:
    ph, _ = await sandbox.lease(rule)
    value = template.format(ph=ph, basic_with_suffix=basic("x-access-token", ph + "suffix"))
    status, _, _ = await curl(sandbox.env, "-H", f"Authorization: {value}", url)
    assert status == 200
    assert github.last().one("authorization") == value


async def test_deleted_session_stops_open_tunnel_and_new_connections(
    proxy: ProxyProcess, github: EchoUpstream
) -> None:
    ph, real = placeholder(), token()
    async with proxy.client() as client:
        session = await client.create_session(allow=ALLOW, ttl_s=60)
        await client.put_lease(session.session_id, "l1", [api_rule(ph, real)], ttl_s=60)
        ctx = ssl.create_default_context(cafile=str(proxy.ca_path))
        async with httpx.AsyncClient(proxy=proxy.proxy_url(session), verify=ctx) as http_client:
            first = await http_client.get(
                "https://api.github.com/1", headers={"authorization": f"token {ph}"}
            )
            await client.delete_session(session.session_id)
            # The open tunnel is closed by the DELETE; httpx reconnects and
            # its CONNECT is refused (407), or a surviving tunnel answers 407,
            # or (a race under load) httpx had already reused the pooled
            # connection the DELETE was closing and reads its close.
            try:
                second = await http_client.get(
                    "https://api.github.com/2", headers={"authorization": f"token {ph}"}
                )
                second_status: int | str = second.status_code
            except httpx.ProxyError as exc:
                assert "407" in str(exc)
                second_status = 407
            except (httpx.ReadError, httpx.RemoteProtocolError):
                second_status = "closed"
    assert first.status_code == 200
    assert second_status in (407, "closed")
    status, _, _ = await curl(proxy.client_env(session), "https://api.github.com/3")
    assert status == 0 or status == 407


# --- must stay last: nothing the proxy wrote contains a real token ---------------


def test_zz_nothing_written_contains_a_real_token(proxy: ProxyProcess) -> None:
    assert len(USED_TOKENS) >= 10
    files = proxy.written_files()
    assert proxy.audit_log in files and proxy.log_path in files
    needles: list[bytes] = []
    for t in USED_TOKENS:
        needles.append(t.encode())
        needles.append(base64.b64encode(f"x-access-token:{t}".encode()))
        needles.append(t[:24].encode())
    hits = [
        (str(path), needle[:12])
        for path in files
        for needle in needles
        if needle in path.read_bytes()
    ]
    assert hits == []
    # Not even the placeholders (or request headers carrying them) are logged.
    logged = [
        str(path) for path in files for ph in USED_PLACEHOLDERS if ph.encode() in path.read_bytes()
    ]
    assert logged == []
    # The audit log did record the swaps (so the grep looked at real content).
    assert any(e["event"] == "swap" for e in proxy.wait_audit(lambda e: e["event"] == "swap"))
