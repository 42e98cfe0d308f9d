"""WebSocket data and control frames are scrubbed (issue 13, item 9).

The reflector, after accepting a WebSocket upgrade that carried the swapped
header, sends the value in a text message, split across the fragments of a
binary message, as a ping payload, as a pong payload and as the close reason.
The client is a raw wsproto client through the proxy tunnel.
"""

from __future__ import annotations

import pytest
import wsproto
import wsproto.events

from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.reflector import Reflector
from tests.proxy.adversarial.conftest import Lease, nothing_written, open_tunnel, ws_request

pytestmark = pytest.mark.timeout(120)


def test_websocket_messages_and_control_frames_are_scrubbed(
    lease: Lease, upstream: Reflector
) -> None:
    sock = open_tunnel(lease)
    ws = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
    raw = bytearray()
    seen: list[bytes] = []
    kinds: set[str] = set()
    with sock:
        sock.sendall(ws_request(ws, lease.authorization))
        asked_close = False
        done = False
        while not done:
            try:
                data = sock.recv(65536)
            except (ConnectionError, TimeoutError):
                break
            if not data:
                break
            raw += data
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, wsproto.events.AcceptConnection):
                    kinds.add("accept")
                elif isinstance(event, wsproto.events.TextMessage):
                    seen.append(event.data.encode())
                    kinds.add("text")
                elif isinstance(event, wsproto.events.BytesMessage):
                    seen.append(bytes(event.data))
                    kinds.add("bytes")
                elif isinstance(event, wsproto.events.Ping):
                    seen.append(bytes(event.payload))
                    kinds.add("ping")
                    sock.sendall(ws.send(event.response()))
                elif isinstance(event, wsproto.events.Pong):
                    seen.append(bytes(event.payload))
                    kinds.add("pong")
                elif isinstance(event, wsproto.events.CloseConnection):
                    seen.append((event.reason or "").encode())
                    kinds.add("close")
                    done = True
            if {"text", "bytes", "ping", "pong"} <= kinds and not asked_close:
                sock.sendall(ws.send(wsproto.events.TextMessage(data="close please")))
                asked_close = True
    assert upstream.last("/ws").auth == f"Bearer {lease.real}"
    assert {"accept", "text", "bytes", "ping", "pong", "close"} <= kinds, kinds
    everything = bytes(raw) + b"\n".join(seen)
    assert lease.leaks(everything) == []
    # The data messages arrive whole, with the placeholder in place of the token.
    joined = b"\n".join(seen)
    assert f"text Bearer {lease.placeholder}".encode() in joined
    assert f"Bearer {lease.placeholder} end".encode().split(b" ")[-2] in joined


def test_zz_nothing_written_contains_a_real_token(proxy: ProxyProcess) -> None:
    nothing_written(proxy)
