"""The one matcher: token forms, the carry-over window, stream decoders."""

from __future__ import annotations

import base64
import gzip
import random
import zlib

import brotli  # type: ignore[import-untyped]
import pytest
import zstandard

from airlock.proxy.scrubber import (
    ChainDecoder,
    DecodeBudget,
    DecodedTooLarge,
    DecodeError,
    StreamScrubber,
    parse_codings,
    scrub,
    scrub_name,
    supported,
    token_forms,
)
from tests.fakes.reflector import bomb
from tests.proxy.addons.conftest import PLACEHOLDER, REAL

FORMS = token_forms(REAL, PLACEHOLDER, ["x-access-token"])


def run_stream(scrubber: StreamScrubber, data: bytes, size: int) -> bytes:
    out: list[bytes] = []
    for i in range(0, len(data), size):
        chunks = scrubber(data[i : i + size])
        assert b"" not in chunks, "an empty chunk would end a chunked HTTP/1 body early"
        out += chunks
    out += scrubber(b"")
    return b"".join(out)


def test_forms_cover_raw_basic_and_base64_at_every_alignment() -> None:
    basic = base64.b64encode(f"x-access-token:{REAL}".encode())
    assert scrub(b"a " + basic + b" b", FORMS) == (
        b"a " + base64.b64encode(f"x-access-token:{PLACEHOLDER}".encode()) + b" b"
    )
    for prefix in (b"", b"x", b"xy", b"xyz"):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            blob = encode(prefix + b'{"token": "' + REAL.encode() + b'"}')
            cleaned = scrub(blob, FORMS)
            decoded = base64.b64decode(
                cleaned + b"==", altchars=b"-_" if encode is not base64.b64encode else None
            )
            assert REAL.encode()[4:-4] not in decoded, (prefix, encode)


def test_scrub_name_matches_any_case() -> None:
    assert (
        scrub_name(b"x-echo-" + REAL.lower().encode(), FORMS) == b"x-echo-" + PLACEHOLDER.encode()
    )


@pytest.mark.parametrize("size", [1, 2, 3, 7, 31, 37, 38, 39, 64, 1000, 65536])
def test_token_split_across_chunks_is_caught(size: int) -> None:
    basic = base64.b64encode(f"x-access-token:{REAL}".encode())
    body = (b"." * 97 + REAL.encode() + b" " + basic) * 300
    out = run_stream(StreamScrubber(FORMS), body, size)
    assert out == scrub(body, FORMS)
    assert REAL.encode() not in out and basic not in out


def test_pairs_are_read_live() -> None:
    pairs: dict[bytes, bytes] = {}
    s = StreamScrubber(pairs)
    first = s(b"before ")
    pairs.update(FORMS)
    rest = s(b"x " + REAL.encode() + b" y") + s(b"")
    assert REAL.encode() not in b"".join(first + rest)


def _deflate_raw(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-15)
    return c.compress(data) + c.flush()


ENCODERS = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": lambda d: zstandard.ZstdCompressor().compress(d),
}


@pytest.mark.parametrize("coding", sorted(ENCODERS))
def test_encoded_streams_are_decoded_then_scrubbed(coding: str) -> None:
    body = (random.Random(1).randbytes(3000) + REAL.encode()) * 50
    packed = ENCODERS[coding](body)
    out = run_stream(StreamScrubber(FORMS, ChainDecoder([coding])), packed, 1000)
    assert out == body.replace(REAL.encode(), PLACEHOLDER.encode())


def test_raw_deflate_and_concatenated_gzip_and_stacked_codings() -> None:
    body = b"a " + REAL.encode() + b" b"
    assert run_stream(StreamScrubber(FORMS, ChainDecoder(["deflate"])), _deflate_raw(body), 3) == (
        b"a " + PLACEHOLDER.encode() + b" b"
    )
    two = gzip.compress(body) + gzip.compress(body)
    assert (
        run_stream(StreamScrubber(FORMS, ChainDecoder(["gzip"])), two, 5).count(
            PLACEHOLDER.encode()
        )
        == 2
    )
    stacked = brotli.compress(gzip.compress(body))
    assert run_stream(StreamScrubber(FORMS, ChainDecoder(["gzip", "br"])), stacked, 4) == (
        b"a " + PLACEHOLDER.encode() + b" b"
    )


@pytest.mark.parametrize("coding", sorted(ENCODERS))
def test_truncated_or_garbage_encoding_raises(coding: str) -> None:
    packed = ENCODERS[coding](b"x" * 10000 + REAL.encode())
    with pytest.raises(DecodeError):
        run_stream(StreamScrubber(FORMS, ChainDecoder([coding])), packed[: len(packed) // 2], 7)
    with pytest.raises(DecodeError):
        run_stream(StreamScrubber(FORMS, ChainDecoder([coding])), b"\xff" * 64 + packed, 7)


def test_codings_parsing() -> None:
    assert parse_codings("gzip, identity, BR") == ["gzip", "br"]
    assert parse_codings(None) == []
    assert supported(["gzip", "zstd"]) and not supported(["compress"])
    with pytest.raises(DecodeError):
        ChainDecoder(["compress"])


# --- wrapped base64 (issue 22) -------------------------------------------------------


def _wrapped(columns: int, newline: bytes) -> bytes:
    text = base64.b64encode(
        b"".join(b"." * k + f" x-access-token:{REAL} ".encode() for k in range(3))
    )
    return newline.join(text[i : i + columns] for i in range(0, len(text), columns)) + newline


@pytest.mark.parametrize("columns", [76, 64, 60, 16])
@pytest.mark.parametrize("newline", [b"\r\n", b"\n"])
def test_wrapped_base64_is_scrubbed_whole_and_streamed(columns: int, newline: bytes) -> None:
    data = _wrapped(columns, newline)
    whole = scrub(data, FORMS)
    flat = whole.replace(b"\r", b"").replace(b"\n", b"")
    assert REAL.encode() not in base64.b64decode(flat)
    assert not [f for f in FORMS if f in flat]
    assert whole.count(newline) == data.count(newline)  # the breaks stay
    for size in (1, 7, 61, 1000):
        assert run_stream(StreamScrubber(FORMS), data, size) == whole


# --- bounded decoding (issue 22) -----------------------------------------------------


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_a_compression_bomb_is_cut_in_bounded_steps(coding: str) -> None:
    packed = bomb(coding, 64)
    decoder = ChainDecoder([coding])
    produced = 0
    with pytest.raises(DecodedTooLarge):
        for i in range(0, len(packed), 65536):
            out = decoder.decode(packed[i : i + 65536])
            # One read never decodes past the carried allowance plus its own credit.
            assert len(out) <= decoder.budget.burst + decoder.budget.ratio * 65536 + (1 << 20)
            produced += len(out)
    assert produced < 64 << 20


def test_the_total_limit_applies_to_plain_ratios_too() -> None:
    body = random.Random(3).randbytes(3 << 20)
    decoder = ChainDecoder(["gzip"], DecodeBudget(max_bytes=2 << 20))
    with pytest.raises(DecodedTooLarge):
        decoder.decode(gzip.compress(body, 1))


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_ordinary_bodies_decode_whole(coding: str) -> None:
    body = b"".join(random.Random(i).randbytes(1000) + b" " * 3000 for i in range(1000))
    packed = {
        "gzip": lambda: gzip.compress(body),
        "br": lambda: bytes(brotli.compress(body, quality=5)),
        "zstd": lambda: zstandard.ZstdCompressor().compress(body),
    }[coding]()
    decoder = ChainDecoder([coding])
    out = b"".join(decoder.decode(packed[i : i + 4096]) for i in range(0, len(packed), 4096))
    assert out + decoder.finish() == body
