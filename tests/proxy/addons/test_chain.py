"""Chain: hook names checked at start, every hook delivered, failing closed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import connection
from mitmproxy.proxy.server_hooks import ServerConnectionHookData
from mitmproxy.test import taddons, tflow

from airlock.proxy.addons.chain import FAILED, Chain, ChainError, hooks_of
from airlock.proxy.context import refused
from tests.proxy.addons.ops_support import make_harness


def hook(chain: Chain, name: str) -> Callable[[Any], Any]:
    """A chain registers its hooks by name at construction, so mypy cannot see them."""
    handler: Callable[[Any], Any] = getattr(chain, name)
    return handler


class Boom:
    def __init__(self, where: str) -> None:
        self.where = where

    def _maybe(self, hook: str) -> None:
        if hook == self.where:
            raise RuntimeError("secret-ish message ghs_REAL")

    async def requestheaders(self, flow: object) -> None:
        self._maybe("requestheaders")

    def responseheaders(self, flow: object) -> None:
        self._maybe("responseheaders")

    def response(self, flow: object) -> None:
        self._maybe("response")

    def websocket_message(self, flow: object) -> None:
        self._maybe("websocket_message")

    def server_connect(self, data: object) -> None:
        self._maybe("server_connect")

    def client_disconnected(self, client: object) -> None:
        self._maybe("client_disconnected")


class Recorder:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def requestheaders(self, flow: object) -> None:
        self.seen.append("requestheaders")

    def response(self, flow: object) -> None:
        self.seen.append("response")

    def client_disconnected(self, client: object) -> None:
        self.seen.append("client_disconnected")

    def tcp_start(self, flow: object) -> None:
        self.seen.append("tcp_start")


def test_misspelt_hook_is_refused_at_construction() -> None:
    class Typo:
        def request_headers(self, flow: object) -> None: ...

    with pytest.raises(ChainError, match=r"Typo\.request_headers is not a mitmproxy hook"):
        Chain([Typo()])


def test_private_helpers_are_allowed_and_every_hook_is_registered() -> None:
    rec = Recorder()
    assert hooks_of(rec) == ["client_disconnected", "requestheaders", "response", "tcp_start"]
    chain = Chain([rec])
    hook(chain, "tcp_start")(object())  # a hook no fixed list used to carry
    assert rec.seen == ["tcp_start"]


async def test_exception_in_a_request_hook_answers_502_and_stops_the_chain(
    tmp_path: Path,
) -> None:
    h = make_harness(tmp_path)
    rec = Recorder()
    chain = Chain([Boom("requestheaders"), rec], h.ctx)
    flow = tflow.tflow()
    with taddons.context():  # type: ignore[no-untyped-call]
        await hook(chain, "requestheaders")(flow)
    assert flow.response is not None and flow.response.status_code == 502
    assert json.loads(flow.response.content or b"")["error"]["code"] == "addon_error"
    assert refused(flow)
    assert rec.seen == []  # later concerns never ran
    (event,) = h.events("addon_error")
    assert event["concern"] == "Boom" and event["hook"] == "requestheaders"
    assert event["error"] == "RuntimeError"
    assert "ghs_REAL" not in h.audit_path.read_text()


def test_exception_in_responseheaders_is_reapplied_after_the_body(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    chain = Chain([Boom("responseheaders"), Recorder()], h.ctx)
    flow = tflow.tflow(resp=True)
    hook(chain, "responseheaders")(flow)
    assert flow.metadata[FAILED] == "Boom.responseheaders"
    # mitmproxy then reads the upstream body into the response object...
    assert flow.response is not None
    flow.response.content = b"upstream body with ghs_REAL"
    hook(chain, "response")(flow)
    # ...and the response hook puts airlock's 502 back.
    assert flow.response.status_code == 502
    assert b"ghs_REAL" not in (flow.response.content or b"")


def test_exception_in_response_replaces_the_response(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    chain = Chain([Boom("response")], h.ctx)
    flow = tflow.tflow(resp=True)
    hook(chain, "response")(flow)
    assert flow.response is not None and flow.response.status_code == 502


def test_exception_in_a_websocket_hook_kills_the_flow(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    chain = Chain([Boom("websocket_message")], h.ctx)
    flow = tflow.twebsocketflow()
    hook(chain, "websocket_message")(flow)
    assert flow.error is not None and flow.killable is False


def test_exception_in_a_connection_hook_closes_the_client(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    chain = Chain([Boom("server_connect")], h.ctx)
    client = tflow.tclient_conn()
    server = tflow.tserver_conn()
    data = ServerConnectionHookData(client=client, server=server)
    hook(chain, "server_connect")(data)
    assert server.error is not None
    assert h.killed == [(client.id, "addon_error")]


def test_teardown_hooks_reach_every_concern_even_after_a_failure(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    rec = Recorder()
    chain = Chain([Boom("client_disconnected"), rec], h.ctx)
    client: connection.Client = tflow.tclient_conn()
    hook(chain, "client_disconnected")(client)
    assert rec.seen == ["client_disconnected"]
    assert h.killed == []  # nothing left to close
