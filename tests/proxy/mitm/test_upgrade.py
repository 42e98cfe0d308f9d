"""WebSocket control frames and the 101 pipe rule, in process."""

from __future__ import annotations

import wsproto.events
from mitmproxy import http
from mitmproxy.test import tutils

from airlock.proxy.mitm.upgrade import scrub_control, should_make_pipe
from airlock.proxy.scrubber import token_forms
from tests.proxy.addons.conftest import PLACEHOLDER, REAL

PAIRS = token_forms(REAL, PLACEHOLDER)


def test_ping_pong_and_close_reason_are_scrubbed_and_fit_a_frame() -> None:
    for kind in (wsproto.events.Ping, wsproto.events.Pong):
        event = scrub_control(kind(payload=b"p " + REAL.encode()), PAIRS)
        assert isinstance(event, kind)
        assert REAL.encode() not in bytes(event.payload) and len(event.payload) <= 125
    close = scrub_control(wsproto.events.CloseConnection(code=4000, reason="r " + REAL * 2), PAIRS)
    assert isinstance(close, wsproto.events.CloseConnection)
    assert close.code == 4000 and REAL[:10] not in (close.reason or "")
    assert len((close.reason or "").encode()) <= 123
    untouched = wsproto.events.Ping(payload=b"hello")
    assert scrub_control(untouched, PAIRS) is untouched


def test_only_websocket_upgrades_become_pipes() -> None:
    ws_req = tutils.treq(headers=http.Headers(upgrade="websocket"))
    other_req = tutils.treq(headers=http.Headers(upgrade="h2c"))
    ws_resp = tutils.tresp(status_code=101, headers=http.Headers(upgrade="websocket"))
    other_resp = tutils.tresp(status_code=101, headers=http.Headers(upgrade="h2c"))
    assert should_make_pipe(ws_req, ws_resp)
    assert not should_make_pipe(other_req, other_resp)
    assert not should_make_pipe(other_req, ws_resp)
    connect = tutils.treq(method=b"CONNECT")
    assert should_make_pipe(connect, tutils.tresp(status_code=200))
    assert not should_make_pipe(ws_req, tutils.tresp(status_code=200))
