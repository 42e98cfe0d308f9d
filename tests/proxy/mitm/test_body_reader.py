"""mitmproxy's HTTP/1 body reader as airlock wraps it: trailer fields dropped, the
message still ends; every chunk one read brought handed on as one piece."""

from __future__ import annotations

import h11
from h11._receivebuffer import ReceiveBuffer

from airlock.proxy.mitm.body_reader import make_body_reader
from tests.proxy.addons.conftest import REAL


def events_until_wait(reader: object, buf: ReceiveBuffer) -> list[object]:
    """What mitmproxy's ``read_body`` loop takes from ``reader`` for one read."""
    out: list[object] = []
    while (event := reader(buf)) is not None:  # type: ignore[operator]
        out.append(event)
        if isinstance(event, h11.EndOfMessage):
            break
    return out


def test_chunked_body_with_trailers_ends_without_them() -> None:
    reader = make_body_reader(None)  # chunked
    buf = ReceiveBuffer()
    buf += b"3\r\nabc\r\n0\r\nX-Reflect: " + REAL.encode() + b"\r\n\r\n"
    events = events_until_wait(reader, buf)
    assert isinstance(events[-1], h11.EndOfMessage) and not events[-1].headers
    assert b"".join(bytes(e.data) for e in events if isinstance(e, h11.Data)) == b"abc"


def test_the_chunks_of_one_read_come_out_as_one_piece_then_the_end() -> None:
    reader = make_body_reader(None)
    buf = ReceiveBuffer()
    buf += (
        b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (b"ab", b"cde", b"f" * 300)) + b"0\r\n\r\n"
    )
    events = events_until_wait(reader, buf)
    assert [type(e) for e in events] == [h11.Data, h11.EndOfMessage]
    assert bytes(events[0].data) == b"abcde" + b"f" * 300  # type: ignore[attr-defined]


def test_a_chunk_cut_by_the_read_waits_for_the_rest() -> None:
    reader = make_body_reader(None)
    buf = ReceiveBuffer()
    buf += b"2\r\nab\r\n6\r\ncd"
    first = events_until_wait(reader, buf)
    assert [bytes(e.data) for e in first] == [b"abcd"]  # type: ignore[attr-defined]
    buf += b"efgh\r\n0\r\n\r\n"
    second = events_until_wait(reader, buf)
    assert [type(e) for e in second] == [h11.Data, h11.EndOfMessage]
    assert bytes(second[0].data) == b"efgh"  # type: ignore[attr-defined]


def test_other_readers_are_unchanged() -> None:
    reader = make_body_reader(3)
    buf = ReceiveBuffer()
    buf += b"abc"
    assert isinstance(reader(buf), h11.Data)
    assert isinstance(reader(buf), h11.EndOfMessage)
