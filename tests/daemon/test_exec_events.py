"""The exec stream's event lines (daemon/exec_events.py): ``json.dumps``'s bytes, whole
characters, exact offsets and 64 KiB events, whatever the reads look like."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airlock.daemon.exec_events import OutputEncoder, json_string
from airlock.daemon.procs.utf8 import MAX_EVENT_BYTES


def reference(data: bytes) -> bytes:
    return json.dumps(data.decode("utf-8", errors="replace"), ensure_ascii=False).encode()


def run(reads: list[bytes]) -> list[dict[str, object]]:
    encoder = OutputEncoder("stdout")
    lines = [line for read in reads for line in encoder.feed(read)] + encoder.finish()
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in lines)
    events: list[dict[str, object]] = [json.loads(line) for line in lines]
    for line, event in zip(lines, events, strict=True):
        # Byte for byte what the route wrote with json.dumps before.
        assert line == json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    return events


def check(reads: list[bytes]) -> list[dict[str, object]]:
    """Text, offsets and sizes against the whole stream decoded at once."""
    whole = b"".join(reads)
    events = run(reads)
    assert "".join(str(e["data"]) for e in events) == whole.decode("utf-8", errors="replace")
    offsets = [int(str(e["offset"])) for e in events] + [len(whole)]
    assert offsets[0] == 0 if events else not whole
    sizes = [b - a for a, b in itertools.pairwise(offsets)]
    assert all(0 < size <= MAX_EVENT_BYTES for size in sizes), "each event: 1..64 KiB of output"
    assert all(len(str(e["data"]).encode()) <= MAX_EVENT_BYTES for e in events)
    # Each event's data is exactly the bytes its offset and the next one delimit.
    for event, (start, end) in zip(events, itertools.pairwise(offsets), strict=True):
        assert event["data"] == whole[start:end].decode("utf-8", errors="replace")
    return events


def test_every_ascii_byte_and_both_escape_paths_match_json() -> None:
    for byte in range(128):
        for piece in (bytes([byte]), bytes([byte]) * 3 + b"\n" * 8, b"\n" * 600 + bytes([byte])):
            assert json_string(piece) == reference(piece), (byte, piece[:10])
    dense = b'y\n"a\\b\tc\r\n' * 9000  # newline-dense: the escape_encode path
    sparse = b'def f(x):  # "quoted" \\ tab\there' * 2000  # the orjson path
    for data in (dense, sparse, dense + b"\x01", dense + b"\x7f", "é\n".encode() * 999):
        assert json_string(data) == reference(data)


@pytest.mark.parametrize(
    "tail", [b"'", b"\\'", b"\\\\'", b"'\\", b"\\x41", b"\\\\x", b'"\'"', b"\\"]
)
def test_quotes_and_backslashes_next_to_each_other_on_the_dense_path(tail: bytes) -> None:
    # escape_encode writes ' as \' and \ as \\: only its own \' may become ' again.
    data = b"\n" * 64 + tail + b"\n" * 64
    assert json_string(data) == reference(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(1, 40))
def test_any_bytes_match_json(data: bytes, repeat: int) -> None:
    # Repeated, short newline-heavy inputs cross into the dense path and out again.
    assert json_string(data * repeat) == reference(data * repeat)


@pytest.mark.parametrize("char", ["é", "€", "😀"])
def test_a_character_cut_by_every_read_boundary_stays_whole(char: str) -> None:
    data = ("a" + char * 7).encode()
    for cut in range(1, len(data)):
        events = check([data[:cut], data[cut:]])
        assert "\ufffd" not in "".join(str(e["data"]) for e in events)
    # One byte at a time: every character arrives in pieces.
    assert "\ufffd" not in "".join(str(e["data"]) for e in check([bytes([b]) for b in data]))


@pytest.mark.parametrize("char", ["é", "€", "😀"])
def test_event_cuts_inside_a_large_read_keep_characters_whole(char: str) -> None:
    # Shift the characters against the 64 KiB cut so that every position inside one lands on it.
    for lead in range(4):
        data = ("x" * lead + char * 100_000).encode()
        events = check([data])
        assert len(events) > 2 and "\ufffd" not in "".join(str(e["data"]) for e in events)


def test_invalid_bytes_keep_data_within_64_kib() -> None:
    # Every byte invalid: each becomes a 3-byte U+FFFD, so events carry fewer input bytes.
    data = b"\xff" * 300_000
    events = check([data[:70_000], data[70_000:]])
    assert all(len(str(e["data"]).encode()) <= MAX_EVENT_BYTES for e in events)
    # A truncated character before the end of the stream is one replacement, as decoded whole.
    check([b"ok\xe2\x82", b"rest"])
    assert check([b"end\xe2\x82"])[-1]["data"] == "\ufffd"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from([b"a", b"\n", "é".encode(), "€".encode(), "😀".encode(), b"\x80", b"\xe2"]),
        max_size=400,
    ),
    st.lists(st.integers(1, 50), min_size=1, max_size=30),
)
def test_any_reads_give_the_whole_stream_decoded(parts: list[bytes], cuts: list[int]) -> None:
    data = b"".join(parts)
    reads: list[bytes] = []
    pos = 0
    for size in cuts * (len(data) // max(1, sum(cuts)) + 1):
        if pos >= len(data):
            break
        reads.append(data[pos : pos + size])
        pos += size
    check(reads)
