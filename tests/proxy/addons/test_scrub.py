"""Scrub, in process: what is streamed, decoded, replaced or refused."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable

import pytest
from mitmproxy import http
from mitmproxy.test import tflow

from airlock.proxy.addons.scrub import Scrub
from airlock.proxy.context import ProxyContext
from tests.proxy.addons.conftest import PLACEHOLDER, REAL, intercepted_flow

BODY = b"a " + REAL.encode() + b" b"
CLEAN = b"a " + PLACEHOLDER.encode() + b" b"


def chunks(out: Iterable[bytes] | bytes) -> list[bytes]:
    """mitmproxy types a stream callback's reply as chunks or one ``bytes``."""
    return [out] if isinstance(out, bytes) else list(out)


def stream_all(flow: http.HTTPFlow, data: bytes, size: int = 5) -> bytes:
    assert flow.response is not None and callable(flow.response.stream)
    out: list[bytes] = []
    for i in range(0, len(data), size):
        out += chunks(flow.response.stream(data[i : i + size]))
    out += chunks(flow.response.stream(b""))
    return b"".join(out)


def response(flow: http.HTTPFlow, headers: dict[str, str], status: int = 200) -> http.Response:
    resp = http.Response.make(status)
    resp.headers = http.Headers([(k.encode(), v.encode()) for k, v in headers.items()])
    resp.data.content = None  # headers only, as at responseheaders
    flow.response = resp
    return resp


def test_small_body_with_length_is_buffered_and_scrubbed(ctx: ProxyContext) -> None:
    scrub = Scrub(ctx)
    flow = intercepted_flow(ctx)
    resp = response(flow, {"content-length": str(len(BODY))})
    scrub.responseheaders(flow)
    assert not resp.stream
    resp.content = BODY
    scrub.response(flow)
    assert resp.content == CLEAN
    assert resp.headers["content-length"] == str(len(CLEAN))


def test_chunked_or_close_delimited_body_is_streamed_from_the_start(ctx: ProxyContext) -> None:
    for headers in ({"transfer-encoding": "chunked"}, {}):
        scrub = Scrub(ctx)
        flow = intercepted_flow(ctx)
        resp = response(flow, headers)
        scrub.responseheaders(flow)
        assert callable(resp.stream), headers
        assert resp.headers["transfer-encoding"] == "chunked"
        assert "content-length" not in resp.headers
        assert stream_all(flow, BODY * 100) == CLEAN * 100


def test_large_body_with_length_is_streamed(ctx: ProxyContext) -> None:
    flow = intercepted_flow(ctx)
    resp = response(flow, {"content-length": str(5 * 1024 * 1024)})
    Scrub(ctx).responseheaders(flow)
    assert callable(resp.stream) and "content-length" not in resp.headers


def test_http2_client_gets_no_transfer_encoding(ctx: ProxyContext) -> None:
    flow = intercepted_flow(ctx)
    flow.client_conn.alpn = b"h2"
    resp = response(flow, {})
    Scrub(ctx).responseheaders(flow)
    assert callable(resp.stream) and "transfer-encoding" not in resp.headers


def test_encoded_body_is_decoded_as_a_stream_and_passed_on_decoded(ctx: ProxyContext) -> None:
    flow = intercepted_flow(ctx)
    packed = gzip.compress(BODY * 50)
    resp = response(flow, {"content-encoding": "gzip", "content-length": str(len(packed))})
    Scrub(ctx).responseheaders(flow)
    assert "content-encoding" not in resp.headers and "content-length" not in resp.headers
    assert stream_all(flow, packed, 17) == CLEAN * 50


def test_unknown_encoding_is_answered_by_airlock(ctx: ProxyContext) -> None:
    flow = intercepted_flow(ctx)
    response(flow, {"content-encoding": "compress", "transfer-encoding": "chunked"})
    Scrub(ctx).responseheaders(flow)
    assert flow.response is not None and flow.response.status_code == 502
    out = stream_all(flow, b"upstream " + REAL.encode())
    assert json.loads(out)["error"]["code"] == "unscrubbable_response"


def test_corrupt_stream_kills_the_flow_and_relays_nothing_more(ctx: ProxyContext) -> None:
    flow = intercepted_flow(ctx)
    flow.live = True
    packed = gzip.compress(BODY * 50)
    response(flow, {"content-encoding": "gzip", "transfer-encoding": "chunked"})
    Scrub(ctx).responseheaders(flow)
    assert flow.response is not None and callable(flow.response.stream)
    flow.response.stream(packed[:40])
    assert flow.response.stream(b"\xff" * 100 + packed) == []
    assert flow.response.stream(b"") == []
    assert flow.error is not None  # killed: mitmproxy cuts the connection


def test_reason_headers_and_trailers_are_scrubbed(ctx: ProxyContext) -> None:
    scrub = Scrub(ctx)
    flow = intercepted_flow(ctx)
    resp = response(flow, {"x-reflect": f"Bearer {REAL}", f"x-{REAL.lower()}": "1"})
    resp.reason = f"OK {REAL}"
    scrub.responseheaders(flow)
    assert REAL not in resp.reason
    assert resp.headers["x-reflect"] == f"Bearer {PLACEHOLDER}"
    assert all(REAL.lower().encode() not in n.lower() for n, _ in resp.headers.fields)
    flow.client_conn.alpn = b"h2"  # an HTTP/2 client side can carry trailers
    resp.trailers = http.Headers(x_reflect=REAL)
    scrub.response(flow)
    assert resp.trailers["x-reflect"] == PLACEHOLDER


def test_trailers_are_dropped_for_an_http1_client(ctx: ProxyContext) -> None:
    """mitmproxy cannot write HTTP/1 trailers: the response would never end."""
    flow = intercepted_flow(ctx)
    resp = response(flow, {"transfer-encoding": "chunked"})
    resp.trailers = http.Headers(x_reflect=REAL)
    Scrub(ctx).response(flow)
    assert resp.trailers is None


@pytest.mark.parametrize("status", [204, 304])
def test_no_body_status_relays_no_data(ctx: ProxyContext, status: int) -> None:
    """An HTTP/2 upstream may send DATA frames for a 204/304: none go on."""
    flow = intercepted_flow(ctx)
    resp = response(flow, {})
    resp.status_code = status
    Scrub(ctx).responseheaders(flow)
    assert callable(resp.stream)
    assert stream_all(flow, BODY * 10) == b""


@pytest.mark.parametrize("te", ["gzip, chunked", "gzip"])
def test_transfer_codings_are_decoded_like_content_codings(ctx: ProxyContext, te: str) -> None:
    flow = intercepted_flow(ctx)
    packed = gzip.compress(BODY * 50)
    resp = response(flow, {"transfer-encoding": te})
    Scrub(ctx).responseheaders(flow)
    assert resp.headers.get("transfer-encoding") == "chunked"
    assert stream_all(flow, packed, 17) == CLEAN * 50


def test_scrubber_is_installed_before_any_swap_on_the_connection(ctx: ProxyContext) -> None:
    """A later HTTP/2 stream's swap is scrubbed from a response already streaming."""
    flow = intercepted_flow(ctx, swapped=False)
    response(flow, {})
    Scrub(ctx).responseheaders(flow)
    assert flow.response is not None and callable(flow.response.stream)
    first = chunks(flow.response.stream(b"nothing yet " * 10))
    state = ctx.connections.get(flow.client_conn.id)
    assert state is not None
    from airlock.proxy.scrubber import token_forms

    state.scrub.update(token_forms(REAL, PLACEHOLDER))
    rest = chunks(flow.response.stream(BODY)) + chunks(flow.response.stream(b""))
    assert REAL.encode() not in b"".join([*first, *rest])


def test_non_websocket_101_is_refused(ctx: ProxyContext) -> None:
    flow = intercepted_flow(ctx)
    flow.response = http.Response.make(101, b"", {"upgrade": "h2c"})
    Scrub(ctx).response(flow)
    assert flow.response.status_code == 502
    assert json.loads(flow.response.content or b"")["error"]["code"] == "upgrade_refused"


def test_websocket_messages_from_server_are_scrubbed(ctx: ProxyContext) -> None:
    flow = tflow.twebsocketflow()
    intercepted = intercepted_flow(ctx)
    flow.client_conn = intercepted.client_conn
    assert flow.websocket is not None
    flow.websocket.messages.append(
        type(flow.websocket.messages[0])(1, False, b"x " + REAL.encode())
    )
    Scrub(ctx).websocket_message(flow)
    assert flow.websocket.messages[-1].content == b"x " + PLACEHOLDER.encode()


def test_outside_intercepted_tunnels_nothing_is_touched(ctx: ProxyContext) -> None:
    flow = tflow.tflow(resp=True)
    assert flow.response is not None
    flow.response.headers["x"] = REAL
    Scrub(ctx).responseheaders(flow)
    assert flow.response.headers["x"] == REAL and not flow.response.stream
