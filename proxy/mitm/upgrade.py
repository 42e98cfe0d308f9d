"""WebSocket control frames towards the sandbox are scrubbed too.

mitmproxy relays ping and pong payloads and the close reason straight from one
side to the other, with no addon hook in between (only data messages reach
``websocket_message``). :func:`install` wraps the one place every frame
leaves through, ``WebsocketConnection.send2``: a Ping, Pong or CloseConnection
bound for a client connection has its payload or reason scrubbed with that
connection's live scrub map (and cut to what a control frame can carry).

Upgrades: mitmproxy's HTTP/1 client turns any 101 into a raw pipe, and the
HTTP layer then relays it as raw TCP, where nothing is scrubbed. ``install``
narrows the pipe to WebSocket upgrades (and CONNECT); any other 101 is answered
with airlock's 502 ``upgrade_refused`` by :class:`airlock.proxy.addons.scrub.Scrub`
and whatever the upstream sends after it is never parsed as part of the flow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import wsproto.events
from mitmproxy import connection, http
from mitmproxy.proxy import commands
from mitmproxy.proxy.layers import websocket
from mitmproxy.proxy.layers.http import _http1

from ..scrubber import scrub
from .patching import Setting, replace

PairsFor = Callable[[str], Mapping[bytes, bytes] | None]

_pairs_for: Setting[PairsFor] = Setting()
_original_send2 = websocket.WebsocketConnection.send2
# RFC 6455: control frame payload <= 125 bytes; a close reason <= 123.
_MAX_CONTROL = 125
_MAX_REASON = 123


def scrub_control(
    event: wsproto.events.Event, pairs: Mapping[bytes, bytes]
) -> wsproto.events.Event:
    """``event`` with its payload or reason scrubbed (a new event when changed)."""
    if isinstance(event, wsproto.events.Ping | wsproto.events.Pong):
        payload = bytes(event.payload)
        clean = scrub(payload, pairs)
        if clean != payload:
            return type(event)(payload=clean[:_MAX_CONTROL])
    elif isinstance(event, wsproto.events.CloseConnection) and event.reason:
        raw = event.reason.encode("utf-8", "surrogateescape")
        clean = scrub(raw, pairs)
        if clean != raw:
            reason = clean[:_MAX_REASON].decode("utf-8", "ignore")
            return wsproto.events.CloseConnection(code=event.code, reason=reason)
    return event


def _send2(self: websocket.WebsocketConnection, event: wsproto.events.Event) -> commands.SendData:
    pairs_for = _pairs_for.value
    if pairs_for is not None and isinstance(self.conn, connection.Client):
        pairs = pairs_for(self.conn.id)
        if pairs:
            event = scrub_control(event, pairs)
    return _original_send2(self, event)


def is_websocket_upgrade(request: http.Request, response: http.Response) -> bool:
    return (
        response.status_code == 101
        and response.headers.get("upgrade", "").strip().lower() == "websocket"
        and "websocket" in request.headers.get("upgrade", "").lower()
    )


def should_make_pipe(request: http.Request, response: http.Response) -> bool:
    """mitmproxy's rule, narrowed: a 101 pipes only for a WebSocket upgrade."""
    if response.status_code == 101:
        return is_websocket_upgrade(request, response)
    return response.status_code == 200 and request.method.upper() == "CONNECT"


def install(pairs_for: PairsFor) -> None:
    """Scrub control frames to clients with ``pairs_for(client_id)``, and pipe
    101s for WebSockets only (process-wide)."""
    _pairs_for.value = pairs_for
    replace(websocket.WebsocketConnection, "send2", _send2)
    replace(_http1, "should_make_pipe", should_make_pipe)
