"""Traces through the proxy: a lease PUT's traceparent on the control log and on the lease's swaps."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from airlock.client.proxy import ProxyClient
from airlock.proxy.protocol import LeaseRule
from airlock.proxy.store.base import LeaseRecord, PlaceholderEntry
from tests.fakes.proxy_harness import ProxyProcess, proxy_process
from tests.fakes.upstream import EchoUpstream
from tests.fakes.wait import wait_until
from tests.proxy.conftest import ProxyFactory
from tests.proxy.helpers import api_rule, curl, placeholder, real_token

pytestmark = pytest.mark.timeout(120)

TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture(scope="module")
def proxy(start_proxy: ProxyFactory) -> Iterator[ProxyProcess]:
    with start_proxy("tracing", extra_args=["--log-format", "json"]) as p:
        yield p


def _control_lines(proxy: ProxyProcess) -> list[dict[str, Any]]:
    out = []
    for line in proxy.log_path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("logger") == "airlock.proxy.control":
                out.append(record)
    return out


async def test_a_lease_puts_trace_is_on_its_swap_audit_lines(
    proxy: ProxyProcess, github: EchoUpstream
) -> None:
    async with ProxyClient(proxy.control, traceparent=TP) as traced, proxy.client() as plain:
        session = await plain.create_session(allow=["api.github.com"], ttl_s=300)
        env = proxy.client_env(session)
        ph, real = placeholder(), real_token()
        await traced.put_lease(session.session_id, "traced", [api_rule(ph, real)], ttl_s=60)
        # A lease installed without a caller context gets a trace of its own.
        ph2, real2 = placeholder(), real_token()
        await plain.put_lease(session.session_id, "other", [api_rule(ph2, real2)], ttl_s=60)
        for token in (ph, ph2):
            status, _, err = await curl(
                env, "-H", f"Authorization: token {token}", "https://api.github.com/user"
            )
            assert status == 200, err

        def swaps() -> list[dict[str, Any]]:
            found = [
                e
                for e in proxy.audit_events()
                if e["event"] == "swap" and e.get("session") == session.session_id
            ]
            return found if len(found) == 2 else []

        by_lease = {e["lease"]: e for e in await wait_until(swaps)}
        assert by_lease["traced"]["trace_id"] == TRACE_ID
        other = by_lease["other"]["trace_id"]
        assert len(other) == 32 and other != TRACE_ID
        created = [
            e
            for e in proxy.audit_events()
            if e["event"] == "lease_created" and e.get("lease") == "traced"
        ]
        assert created and created[-1]["trace_id"] == TRACE_ID
        await plain.delete_session(session.session_id)
    log = _control_lines(proxy)
    put = [r for r in log if r["method"] == "PUT" and r["trace_id"] == TRACE_ID]
    assert put and put[0]["traceparent"] == TP and put[0]["status"] == 200
    assert put[0]["route"] == "/v1/sessions/{sid}/leases/{lid}"
    # Every logged line is metadata: no token, no placeholder.
    text = proxy.log_path.read_text()
    assert real not in text and ph not in text


def test_the_trace_id_survives_the_stores_round_trip() -> None:
    rule = LeaseRule.model_validate(
        {
            "host": "api.github.com",
            "placeholder": "ph_abcdefgh123",
            "schemes": ["token"],
            "replace": {"scheme": "bearer", "token": "t" * 20},
        }
    )
    lease = LeaseRecord("s1", "l1", (rule,), 1e10, trace_id=TRACE_ID)
    assert LeaseRecord.from_json(lease.to_json()) == lease
    entry = lease.entry_for("ph_abcdefgh123")
    assert PlaceholderEntry.from_json(entry.to_json()).trace_id == TRACE_ID
    # Records stored before traces existed still load.
    untraced = LeaseRecord("s1", "l1", (rule,), 1e10)
    assert "trace_id" not in untraced.to_json()
    assert LeaseRecord.from_json(untraced.to_json()).trace_id is None


async def test_otel_exports_a_span_per_control_request(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes.otlp import otlp_collector

    async with otlp_collector() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.traces_endpoint)
        with proxy_process(tmp_path_factory.mktemp("otel"), extra_args=["--otel"]) as proxy:
            async with ProxyClient(proxy.control, traceparent=TP) as client:
                session = await client.create_session(allow=["api.github.com"], ttl_s=60)
                await client.put_lease(
                    session.session_id,
                    "l1",
                    [api_rule(placeholder(), real_token())],
                    ttl_s=30,
                )
            name = "control PUT /v1/sessions/{sid}/leases/{lid}"
            await wait_until(lambda: collector.named(name), message="no control span arrived")
        span = collector.named(name)[0]
        assert span.service == "airlock-proxy" and span.kind == 2
        assert span.trace_id == TRACE_ID and span.parent_span_id == TP.split("-")[2]
        assert span.attributes["http.response.status_code"] == 200
        created = collector.named("control POST /v1/sessions")
        assert created and created[0].attributes["http.response.status_code"] == 201
