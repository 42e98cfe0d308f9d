"""The prepared matcher (:class:`airlock.proxy.scrubber.Forms`) on large chunks.

The stream scrubber and the guard search a large chunk where it lies and the
seam with the bytes held from the previous chunk on its own. These cases put a
form (plain and wrapped) across a 64 KiB chunk boundary at every offset and
check that neither the scrubber (its output equals scrubbing the whole body)
nor the guard (a violation) misses it; and that reducing the forms to the
minimal ones loses none. Every case runs twice: on the Python path and on
the compiled one (:mod:`airlock.proxy.form_scan`).
"""

from __future__ import annotations

import random

import pytest

from airlock.proxy import form_scan
from airlock.proxy.guard import GuardViolation, ResponseGuard
from airlock.proxy.scrubber import (
    Forms,
    StreamScrubber,
    partial_form_at_end,
    scrub,
    token_forms,
)

REAL = "ghs_REAL0123456789abcdef0123456789abcdef"
SHOWN = "airlock-gh-00000000-0000-0000-0000-000000000000"
PAIRS = token_forms(REAL, SHOWN, ["x-access-token"])
CHUNK = 64 * 1024
# Random bytes with line breaks and base64 letters in them, as a binary body has.
FILLER = random.Random(22).randbytes(3 * CHUNK)


@pytest.fixture(autouse=True, params=["python", "compiled"])
def matcher(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which path answers: Python's (while a form set compiles) or Hyperscan's."""
    path: str = request.param
    chosen = (lambda _needles: None) if path == "python" else form_scan.scanner_now
    monkeypatch.setattr(form_scan, "scanner_for", chosen)
    return path


def wrap(form: bytes, columns: int, newline: bytes) -> bytes:
    return newline.join(form[i : i + columns] for i in range(0, len(form), columns))


def test_the_minimal_forms_find_every_form_plain_and_wrapped() -> None:
    forms = Forms(PAIRS)
    assert len(forms.minimal) < len(forms.ordered)
    for real in PAIRS:
        for shown in (real, wrap(real, 16, b"\r\n"), wrap(real, 5, b"\n")):
            assert forms.present(b"x\n" + shown + b"\ny"), shown
            assert forms.find(b"x\n" + shown + b"\ny"), shown
        assert not forms.present(PAIRS[real])  # the placeholder's form is not a form


def _body(form: bytes, offset: int) -> bytes:
    """Filler with ``form`` starting ``offset`` bytes before the first chunk boundary."""
    at = CHUNK - offset
    return FILLER[:at] + form + FILLER[at + len(form) :]


def _cases() -> list[tuple[bytes, int]]:
    token = REAL.encode()
    basic = max(PAIRS, key=len)  # the longest form: Basic base64(user:token)
    wrapped = wrap(basic, 16, b"\r\n")
    return [(f, k) for f in (token, basic, wrapped) for k in range(0, len(f) + 2)]


@pytest.mark.parametrize("form, offset", _cases())
def test_a_form_across_a_chunk_boundary_is_scrubbed(form: bytes, offset: int) -> None:
    body = _body(form, offset)
    scrubber = StreamScrubber(PAIRS)
    out = [piece for i in range(0, len(body), CHUNK) for piece in scrubber(body[i : i + CHUNK])]
    out += scrubber(b"")
    assert b"".join(out) == scrub(body, PAIRS)
    assert not Forms(PAIRS).present(b"".join(out))


@pytest.mark.parametrize("form, offset", _cases())
def test_a_form_across_two_chunked_writes_stops_the_guard(form: bytes, offset: int) -> None:
    body = _body(form, offset)
    guard = ResponseGuard(PAIRS)
    guard.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    with pytest.raises(GuardViolation) as caught:  # raised by the write that completes it
        for i in range(0, len(body), CHUNK):
            piece = body[i : i + CHUNK]
            guard.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        guard.send(b"0\r\n\r\n")
    assert caught.value.reason == "token"


def test_large_clean_chunks_go_out_unchanged() -> None:
    guard = ResponseGuard(PAIRS)
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(FILLER)
    out = guard.send(head)
    for i in range(0, len(FILLER), CHUNK):
        out += guard.send(FILLER[i : i + CHUNK])
    assert out == head + FILLER


def test_a_clean_chunk_goes_out_whole_and_only_a_possible_start_is_held() -> None:
    """The scrubber's hot path: a chunk with no form that does not end on the
    start of one is passed on as it came (no copy, nothing held back); one
    that ends on the start of a form holds exactly those bytes."""
    scrubber = StreamScrubber(PAIRS)
    clean = FILLER[:CHUNK].replace(b"g", b"-") + b"."  # no form starts with "-" or "."
    assert all(not real.startswith((b"-", b".")) for real in PAIRS)
    out = scrubber(clean)
    assert len(out) == 1 and out[0] is clean and scrubber.tail == b""
    start = REAL.encode()[:7]
    out = scrubber(clean + start)
    assert out == [clean] and scrubber.tail == start
    out = scrubber(REAL.encode()[7:] + b" done") + scrubber(b"")
    assert b"".join(out) == SHOWN.encode() + b" done"


def test_the_cheap_cut_before_a_partial_search_agrees_with_the_full_search() -> None:
    """``Forms.partial_at_end`` searches only the trailing run of form bytes and
    line breaks; it finds what a search of the whole end finds, for every
    prefix of every form (plain and wrapped) after filler, and for filler alone."""
    forms = Forms(PAIRS)
    rng = random.Random(7)
    ends = [FILLER[i : i + 300] for i in range(0, 30000, 300)]
    held = 0
    for real in PAIRS:
        for shown in (real, wrap(real, 16, b"\r\n"), wrap(real, 16, b"\n")):
            for k in range(1, len(shown)):
                ends.append(rng.randbytes(200) + shown[:k])
    for data in ends:
        expected = partial_form_at_end(data, forms.ordered)
        assert forms.partial_at_end(data) == expected, data[-80:]
        held += bool(expected)
    assert held > len(ends) // 2  # the prefixes were found, not only agreed on as 0
