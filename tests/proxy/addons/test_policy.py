"""EgressPolicy / Egress: address classes, own endpoints as socket addresses,
plain http to an intercepted host refused before any DNS lookup."""

from __future__ import annotations

from pathlib import Path

import pytest
from mitmproxy import http
from mitmproxy.proxy.server_hooks import ServerConnectionHookData
from mitmproxy.test import tflow

from airlock.proxy.addons.auth import SESSION
from airlock.proxy.addons.policy import EgressPolicy
from airlock.proxy.config import ControlEndpoint
from airlock.proxy.egress import Egress, Refused, is_local_address
from airlock.proxy.hosts import embedded_ipv4, parse_ip, refused_address
from airlock.proxy.state import Tunnel
from airlock.proxy.store.base import SessionRecord, hash_secret
from tests.proxy.addons.ops_support import (
    Harness,
    connect_flow,
    later,
    make_harness,
    request_flow,
)


@pytest.mark.parametrize(
    ("addr", "embedded"),
    [
        ("::ffff:10.0.0.1", ["10.0.0.1"]),
        ("::10.0.0.1", ["10.0.0.1"]),
        ("64:ff9b::a9fe:a9fe", ["169.254.169.254"]),
        ("2002:a00:1::", ["10.0.0.1"]),
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", ["65.54.227.120", "10.0.0.1"]),
        ("::1", []),
        ("::", []),
        ("2606:4700::1111", []),
    ],
)
def test_embedded_ipv4(addr: str, embedded: list[str]) -> None:
    ip = parse_ip(addr)
    assert ip is not None and ip.version == 6
    assert [str(x) for x in embedded_ipv4(ip)] == embedded


@pytest.mark.parametrize(
    "addr",
    [
        "64:ff9b::10.0.0.1",
        "64:ff9b:1::1",
        "2002:c0a8:101::1",
        "2001:0:a00:1::1",
        "fec0::1",
        "fc00::1",
        "::127.0.0.1",
        "::ffff:0:127.0.0.1",
    ],
)
def test_ipv6_forms_of_internal_addresses_are_refused(addr: str) -> None:
    ip = parse_ip(addr)
    assert ip is not None and refused_address(ip) is not None


@pytest.mark.parametrize(
    "addr", ["64:ff9b::8.8.8.8", "2002:808:808::1", "2606:4700::1111", "8.8.8.8"]
)
def test_public_addresses_pass(addr: str) -> None:
    ip = parse_ip(addr)
    assert ip is not None and refused_address(ip) is None


def test_own_endpoints_compare_as_socket_addresses(tmp_path: Path) -> None:
    h = make_harness(
        tmp_path,
        listen_host="127.0.0.1",
        listen_port=18080,
        control=ControlEndpoint(kind="tcp", host="127.0.0.1", port=18081),
    )
    egress = h.ctx.egress
    for host in ("127.0.0.1", "::ffff:127.0.0.1", "0.0.0.0", "::", "[::ffff:127.0.0.1]"):
        assert egress.is_own((host, 18080)), host
        assert egress.is_own((host, 18081)), host
    assert not egress.is_own(("127.0.0.1", 18082))
    assert not egress.is_own(("127.0.0.2", 18080))  # another socket address


def test_wildcard_listener_owns_every_local_address(tmp_path: Path) -> None:
    h = make_harness(tmp_path, listen_host="0.0.0.0", listen_port=18080)
    egress: Egress = h.ctx.egress
    assert egress.is_own(("127.0.0.1", 18080))
    assert egress.is_own(("127.0.0.53", 18080))
    assert egress.is_own(("::ffff:127.0.0.1", 18080))
    local, test_net = parse_ip("127.0.0.1"), parse_ip("192.0.2.1")  # 192.0.2.0/24 is TEST-NET
    assert local is not None and test_net is not None
    assert is_local_address(local)
    assert not is_local_address(test_net)
    assert not egress.is_own(("192.0.2.1", 18080))


async def test_plain_http_to_intercepted_host_is_refused_without_dns(tmp_path: Path) -> None:
    h = make_harness(tmp_path, intercept=frozenset({"api.github.com"}))
    lookups: list[str] = []

    async def no_dns(host: str, port: int) -> list[str]:
        lookups.append(host)
        raise AssertionError("DNS must not be consulted")

    h.ctx.egress._resolve = no_dns  # type: ignore[method-assign]
    session = SessionRecord("s1", hash_secret("x"), ("*",), later(60))
    decision = await h.ctx.egress.decide(session, "api.github.com", 80, tunnel=False)
    assert isinstance(decision, Refused) and decision.reason == "plain_http_intercepted"

    flow = request_flow()
    flow.request.scheme = "http"
    flow.request.port = 80
    flow.metadata[SESSION] = session
    await EgressPolicy(h.ctx).requestheaders(flow)
    assert flow.response is not None and flow.response.status_code == 403
    assert lookups == []


async def test_connect_to_embedded_private_literal_is_refused(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    flow = connect_flow(host="64:ff9b::a00:1")
    flow.metadata[SESSION] = SessionRecord("s1", hash_secret("x"), ("*",), later(60))
    await EgressPolicy(h.ctx).http_connect(flow)
    assert flow.response is not None and flow.response.status_code == 403
    assert flow.response.headers["x-airlock-refusal"] == "destination_refused"


def _session_of(*allow: str) -> SessionRecord:
    return SessionRecord("s1", hash_secret("x"), allow, later(60))


async def _refusal(h: Harness, flow: http.HTTPFlow, status: int, reason: str) -> None:
    await EgressPolicy(h.ctx).http_connect(flow)
    assert flow.response is not None and flow.response.status_code == status
    assert flow.response.headers["x-airlock-refusal"] == reason
    assert h.ctx.connections.get(flow.client_conn.id) is None  # no tunnel, no pin
    assert [e["reason"] for e in h.events("refusal")][-1] == reason


async def test_every_egress_refusal_names_its_reason(tmp_path: Path) -> None:
    h = make_harness(
        tmp_path,
        listen_port=18080,
        resolve={("own.test", 443): ("127.0.0.1", 18080), ("local.test", 443): ("10.0.0.1", 443)},
    )

    async def no_such_name(host: str, port: int) -> list[str]:
        raise OSError(f"cannot resolve {host}")

    h.ctx.egress._resolve = no_such_name  # type: ignore[method-assign]
    unauthenticated = connect_flow(host="api.github.com")
    await _refusal(h, unauthenticated, 407, "proxy_auth_required")
    cases = [
        ("evil.example", ("api.github.com",), 403, "host_not_allowed"),
        ("own.test", ("*",), 403, "control_api"),
        ("nowhere.test", ("*",), 502, "dns_failed"),
        ("10.0.0.1", ("*",), 403, "destination_refused"),
    ]
    for host, allow, status, reason in cases:
        flow = connect_flow(host=host)
        flow.metadata[SESSION] = _session_of(*allow)
        await _refusal(h, flow, status, reason)


async def test_a_request_for_another_destination_than_its_tunnel_is_refused(
    tmp_path: Path,
) -> None:
    h = make_harness(tmp_path)
    connect = connect_flow()
    state = h.ctx.connections.state(connect.client_conn.id)
    state.session_id = "s1"
    state.tunnel = Tunnel("s1", "api.github.com", 443, intercept=False)
    flow = request_flow(connect)
    flow.request.host = "uploads.github.com"
    await EgressPolicy(h.ctx).requestheaders(flow)
    assert flow.response is not None and flow.response.status_code == 403
    assert flow.response.headers["x-airlock-refusal"] == "tunnel_mismatch"


def test_a_dial_without_an_egress_decision_is_refused(tmp_path: Path) -> None:
    """mitmproxy may only dial what the policy pinned: anything else fails the dial."""
    h = make_harness(tmp_path)
    client = tflow.tclient_conn()
    server = tflow.tserver_conn()
    server.address = ("api.github.com", 443)
    EgressPolicy(h.ctx).server_connect(ServerConnectionHookData(server, client))
    assert server.error is not None and "no egress decision" in server.error
    assert h.ctx.metrics.refusals.labels(reason="no_egress_decision")._value.get() == 1
    assert [e["reason"] for e in h.events("refusal")] == ["no_egress_decision"]
