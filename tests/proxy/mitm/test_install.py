"""``mitm.install`` patches mitmproxy once, ``mitm.uninstall`` puts it back as it was."""

from __future__ import annotations

import logging
from typing import Any

import mitmproxy.proxy.layers.http as http_layers
import pytest
from mitmproxy.proxy import server as mitm_server
from mitmproxy.proxy.layers import tls as tls_layers
from mitmproxy.proxy.layers import websocket
from mitmproxy.proxy.layers.http import HttpStream, _base, _http1, _http2

from airlock.proxy import mitm
from airlock.proxy.guard import LivePairs, ResponseGuard
from airlock.proxy.mitm import guard_layer, patching

# Every attribute of mitmproxy airlock replaces (DESIGN: one place, installed once).
PATCHED: list[tuple[Any, str]] = [
    (mitm_server, "TCP_TIMEOUT"),
    (mitm_server.ConnectionHandler, "handle_connection"),
    (_http1.Http1Server, "_handle_event"),
    (tls_layers.ClientTLSLayer, "send_data"),
    (HttpStream, "start_request_stream"),
    (_http2.Http2Server, "handle_h2_event"),
    (_http1, "make_error_response"),
    (_http2, "format_error"),
    (_base, "format_error"),
    (http_layers, "Http2Server"),
    (websocket.WebsocketConnection, "send2"),
    (_http1, "should_make_pipe"),
    (_http1.Http1Client, "read_headers"),
    (_http2.Http2Client, "handle_h2_event"),
    (_http1, "make_body_reader"),
]


def _wiring() -> mitm.Wiring:
    def ignore(*_args: object) -> None:
        return None

    return mitm.Wiring(
        head=mitm.HeadGuard(max_bytes=1024, timeout_s=5.0, on_too_large=ignore, on_timeout=ignore),
        stream_guard=mitm.StreamGuard(
            make=lambda cid: ResponseGuard(LivePairs(dict)), on_violation=ignore
        ),
        h2_meter=ignore,
        idle_timeout_s=42.4,
        pairs_for=lambda cid: None,
        swapped_forms=mitm.SwappedForms(),
    )


def test_install_patches_every_concern_and_uninstall_restores_mitmproxy() -> None:
    before = [getattr(owner, name) for owner, name in PATCHED]
    handler = logging.NullHandler()
    logging.getLogger().addHandler(handler)
    try:
        with mitm.installed(_wiring()):
            after = [getattr(owner, name) for owner, name in PATCHED]
            changed = [
                f"{o.__name__}.{n}"
                for (o, n), b, a in zip(PATCHED, before, after, strict=True)
                if a is b
            ]
            assert not changed, f"not patched: {changed}"
            assert mitm_server.TCP_TIMEOUT == 42
            assert guard_layer.active()
            assert len(handler.filters) == 1  # the log scrubber
            assert {(id(o), n) for o, n in patching.replaced()} == {(id(o), n) for o, n in PATCHED}
        restored = [getattr(owner, name) for owner, name in PATCHED]
        assert all(a is b for a, b in zip(restored, before, strict=True))
        assert handler.filters == [] and patching.replaced() == []
        assert not guard_layer.active()  # what install handed over is dropped too
    finally:
        logging.getLogger().removeHandler(handler)


def test_a_second_install_is_refused_until_uninstall() -> None:
    with (
        mitm.installed(_wiring()),
        pytest.raises(RuntimeError, match="already installed; call uninstall"),
    ):
        mitm.install(_wiring())
    mitm.install(_wiring())  # after uninstall: allowed again
    mitm.uninstall()
    assert patching.replaced() == []
