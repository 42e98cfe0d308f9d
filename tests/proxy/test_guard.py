"""The connection-level guard on its own: framing, codings and the matcher (pure, fast).

Each case feeds :class:`airlock.proxy.guard.ResponseGuard` the bytes mitmproxy
would write towards the sandbox, in every split (one byte at a time, in two
pieces at each offset, whole), and checks what it lets through.
"""

from __future__ import annotations

import base64
import gzip
import itertools

import pytest

from airlock.proxy.guard import HOLD_MIN, GuardViolation, ResponseGuard
from airlock.proxy.scrubber import token_forms

REAL = "ghs_REAL0123456789abcdef0123456789abcdef"
SHOWN = "airlock-gh-00000000-0000-0000-0000-000000000000"
PAIRS = token_forms(REAL, SHOWN, ["x-access-token"])


def run(data: bytes, splits: list[int] | None = None, methods: tuple[str, ...] = ()) -> bytes:
    """Feed ``data`` cut at ``splits``; returns what went out (raises on a violation)."""
    guard = ResponseGuard(PAIRS)
    for method in methods:
        guard.request(method)
    out = bytearray()
    cuts = [0, *(splits or []), len(data)]
    for a, b in itertools.pairwise(cuts):
        out += guard.send(data[a:b])
    return bytes(out)


def every_split(data: bytes, methods: tuple[str, ...] = ()) -> list[bytes | str]:
    """What goes out (or the violation reason) for each way of cutting ``data``."""
    results: list[bytes | str] = []
    ways = [[], list(range(1, len(data)))] + [[k] for k in range(1, len(data))]
    for splits in ways:
        try:
            results.append(run(data, splits, methods))
        except GuardViolation as exc:
            results.append(exc.reason)
    return results


def clean(data: bytes, methods: tuple[str, ...] = ()) -> None:
    assert set(every_split(data, methods)) == {data}


def refused(data: bytes, reason: str, methods: tuple[str, ...] = ()) -> None:
    assert set(every_split(data, methods)) == {reason}


def chunked(*chunks: bytes, trailers: bytes = b"") -> bytes:
    body = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(c), c) for c in chunks)
    return body + b"0\r\n" + trailers + b"\r\n"


OK = b"HTTP/1.1 200 OK\r\n"


def test_well_framed_responses_pass_unchanged() -> None:
    clean(
        OK
        + b"Content-Length: 5\r\n\r\nhello"
        + OK
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + chunked(b"ab", b"cd")
    )
    clean(OK + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(b"x" * 40, trailers=b"X-T: 1\r\n"))
    clean(b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + OK + b"Content-Length: 0\r\n\r\n")
    clean(OK + b"Connection: close\r\n\r\n" + b"until close " * 20)


def test_the_placeholder_passes() -> None:
    shown = base64.b64encode(f"x-access-token:{SHOWN}".encode())
    body = b"Bearer " + SHOWN.encode() + b" Basic " + shown
    clean(OK + b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


@pytest.mark.parametrize(
    "form",
    [
        REAL.encode(),
        base64.b64encode(REAL.encode()),
        base64.b64encode(f"x-access-token:{REAL}".encode()),
        base64.urlsafe_b64encode(b"\xfb" + REAL.encode()),
    ],
)
@pytest.mark.parametrize("where", ["status", "header", "body", "chunks", "trailer", "close"])
def test_a_real_form_anywhere_is_refused(form: bytes, where: str) -> None:
    heads = {
        "status": b"HTTP/1.1 200 " + form + b"\r\nContent-Length: 0\r\n\r\n",
        "header": OK + b"X-Echo: " + form + b"\r\nContent-Length: 0\r\n\r\n",
        "body": OK + b"Content-Length: %d\r\n\r\n%s" % (len(form) + 2, b"<" + form + b">"),
        # split across two chunks: the framing between the halves does not hide it
        "chunks": OK + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(form[:20], form[20:]),
        "trailer": OK
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + chunked(b"a", trailers=b"X: " + form + b"\r\n"),
        "close": OK + b"\r\n" + b"x" * 30 + form,
    }
    refused(heads[where], "token")


@pytest.mark.parametrize("columns", [76, 64, 60])
@pytest.mark.parametrize("newline", [b"\r\n", b"\n"])
def test_wrapped_base64_is_refused(columns: int, newline: bytes) -> None:
    text = base64.b64encode(b"-----" * 7 + f"x-access-token:{REAL}".encode() + b"." * 30)
    wrapped = newline.join(text[i : i + columns] for i in range(0, len(text), columns))
    refused(OK + b"Content-Length: %d\r\n\r\n%s" % (len(wrapped), wrapped), "token")


def test_a_token_in_a_chunk_extension_is_refused() -> None:
    data = OK + b"Transfer-Encoding: chunked\r\n\r\n2;x=" + REAL.encode() + b"\r\nab\r\n0\r\n\r\n"
    refused(data, "token")


def test_a_message_ending_on_a_long_prefix_is_refused_and_it_is_held_until_then() -> None:
    prefix = REAL.encode()[:30]
    data = OK + b"Content-Length: %d\r\n\r\n%s" % (len(prefix) + 1, b"-" + prefix)
    refused(data, "token")
    guard = ResponseGuard(PAIRS)
    out = guard.send(data[:-5])
    assert prefix[:HOLD_MIN] not in out  # held, not sent


def test_short_coincidences_are_not_held() -> None:
    """Bytes that could start a form but are too short to matter go out at once."""
    body = b"x" + REAL.encode()[:5]
    guard = ResponseGuard(PAIRS)
    head = OK + b"Transfer-Encoding: chunked\r\n\r\n"
    assert guard.send(head + b"6\r\n" + body + b"\r\n") == head + b"6\r\n" + body + b"\r\n"


def test_a_held_prefix_that_does_not_continue_is_released() -> None:
    prefix = REAL.encode()[:30]
    head = OK + b"Transfer-Encoding: chunked\r\n\r\n"
    guard = ResponseGuard(PAIRS)
    first = guard.send(head + b"1e\r\n" + prefix + b"\r\n")
    assert prefix not in first
    rest = guard.send(b"3\r\n!!!\r\n0\r\n\r\n")
    assert first + rest == head + b"1e\r\n" + prefix + b"\r\n3\r\n!!!\r\n0\r\n\r\n"


@pytest.mark.parametrize("status", [204, 304])
def test_no_body_statuses_carry_no_bytes(status: int) -> None:
    head = b"HTTP/1.1 %d X\r\nContent-Length: 5\r\n\r\n" % status
    refused(head + b"hello", "framing")
    clean(head + OK + b"Content-Length: 2\r\n\r\nok")


def test_head_answers_carry_no_body() -> None:
    data = OK + b"Content-Length: 5\r\n\r\n"
    clean(data + OK + b"Content-Length: 2\r\n\r\nok", methods=("HEAD", "GET"))
    refused(data + b"hello", "framing", methods=("HEAD",))


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        (b"Content-Encoding: gzip\r\nContent-Length: 3\r\n", "content_coding"),
        (b"Content-Encoding: identity, br\r\nTransfer-Encoding: chunked\r\n", "content_coding"),
        (b"Transfer-Encoding: gzip, chunked\r\n", "transfer_coding"),
        (b"Transfer-Encoding: gzip\r\n", "transfer_coding"),
        (b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n", "framing"),
        (b"Content-Length: 3\r\nContent-Length: 4\r\n", "framing"),
        (b"Content-Length: -3\r\n", "framing"),
        (b" folded: x\r\nContent-Length: 3\r\n", "framing"),
    ],
)
def test_codings_and_ambiguous_framing_are_refused(fields: bytes, reason: str) -> None:
    refused(OK + fields + b"\r\n" + gzip.compress(b"x")[:3], reason)


def test_empty_bodies_may_name_a_coding() -> None:
    clean(b"HTTP/1.1 304 Not Modified\r\nContent-Encoding: gzip\r\n\r\n")
    clean(OK + b"Content-Encoding: gzip\r\nContent-Length: 0\r\n\r\n")


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/2 200\r\n\r\n",
        b"\x00\x00\x12\x04\x00\x00\x00\x00\x00",  # an HTTP/2 frame
        OK + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
        OK + b"Transfer-Encoding: chunked\r\n\r\n1\r\nabX",
    ],
)
def test_what_is_not_http1_framing_is_refused(data: bytes) -> None:
    refused(data, "framing")


def test_after_101_frames_are_matched_too() -> None:
    up = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"
    clean(up + b"\x81\x05hello")
    refused(up + b"\x81\x30" + REAL.encode() + b"abcdefgh", "token")
    refused(
        b"HTTP/1.1 101 S\r\nUpgrade: websocket\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
        "websocket_extension",
    )


def test_a_violation_is_final() -> None:
    guard = ResponseGuard(PAIRS)
    with pytest.raises(GuardViolation):
        guard.send(OK + b"X: " + REAL.encode() + b"\r\n\r\n")
    with pytest.raises(GuardViolation):
        guard.send(OK + b"Content-Length: 0\r\n\r\n")


def test_a_token_swapped_later_is_matched_from_then_on() -> None:
    pairs: dict[bytes, bytes] = {}
    guard = ResponseGuard(pairs)
    assert guard.send(OK + b"Content-Length: 4\r\n\r\nfine")
    pairs.update(PAIRS)
    with pytest.raises(GuardViolation):
        guard.send(OK + b"Content-Length: 40\r\n\r\n" + REAL.encode())
