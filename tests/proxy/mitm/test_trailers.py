"""HTTP/1 trailer fields are dropped by the body reader, the message still ends."""

from __future__ import annotations

import h11
from h11._receivebuffer import ReceiveBuffer

from airlock.proxy.mitm.trailers import make_body_reader
from tests.proxy.addons.conftest import REAL


def test_chunked_body_with_trailers_ends_without_them() -> None:
    reader = make_body_reader(None)  # chunked
    buf = ReceiveBuffer()
    buf += b"3\r\nabc\r\n0\r\nX-Reflect: " + REAL.encode() + b"\r\n\r\n"
    events = []
    while (event := reader(buf)) is not None:
        events.append(event)
        if isinstance(event, h11.EndOfMessage):
            break
    assert isinstance(events[-1], h11.EndOfMessage) and not events[-1].headers
    assert b"".join(bytes(e.data) for e in events if isinstance(e, h11.Data)) == b"abc"


def test_other_readers_are_unchanged() -> None:
    reader = make_body_reader(3)
    buf = ReceiveBuffer()
    buf += b"abc"
    assert isinstance(reader(buf), h11.Data)
    assert isinstance(reader(buf), h11.EndOfMessage)
