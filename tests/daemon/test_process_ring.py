"""The pieces under streaming and background processes: the ring, the UTF-8 chunker."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airlock.daemon.procs.ring import OutputRing
from airlock.daemon.procs.utf8 import Utf8Chunker, split_incomplete_tail


def test_combined_offsets_in_arrival_order() -> None:
    ring = OutputRing(1024)
    ring.append("stdout", b"out1 ")
    ring.append("stderr", b"err1 ")
    ring.append("stdout", b"out2")
    part = ring.read(0, 100, complete=True)
    assert (part.stdout, part.stderr, part.next_offset, part.dropped) == (
        "out1 out2",
        "err1 ",
        14,
        0,
    )
    part = ring.read(5, 5, complete=True)
    assert (part.stdout, part.stderr, part.next_offset) == ("", "err1 ", 10)


def test_old_output_is_dropped_and_counted() -> None:
    ring = OutputRing(10)
    for i in range(5):
        ring.append("stdout", bytes([65 + i]) * 4)  # 20 bytes through a 10-byte ring
    assert (ring.start, ring.end) == (10, 20)
    part = ring.read(0, 100, complete=True)
    assert part.dropped == 10 and part.stdout == "CCDDDDEEEE"[0:10] and part.next_offset == 20


def test_a_read_never_ends_inside_a_character_while_more_may_come() -> None:
    ring = OutputRing(1024)
    ring.append("stdout", "aé".encode())  # 3 bytes: a, then 2-byte é
    part = ring.read(0, 2, complete=False)
    assert part.stdout == "a" and part.next_offset == 1
    part = ring.read(1, 2, complete=False)
    assert part.stdout == "é" and part.next_offset == 3


@given(st.text(min_size=1, max_size=200), st.integers(min_value=1, max_value=16))
def test_chunker_reassembles_any_text_cut_anywhere(text: str, step: int) -> None:
    data = text.encode()
    chunker = Utf8Chunker()
    out = []
    at = 0
    for i in range(0, len(data), step):
        chunk = chunker.feed(data[i : i + step])
        if chunk is not None:
            assert chunk.offset == at
            at += len(chunk.data.encode())
            out.append(chunk.data)
    tail = chunker.finish()
    assert tail is None
    assert "".join(out) == text


@given(st.text(max_size=50), st.integers(min_value=0, max_value=200))
def test_split_incomplete_tail_keeps_whole_characters(text: str, cut: int) -> None:
    data = text.encode()[:cut]
    keep = split_incomplete_tail(data)
    data[:keep].decode()  # never raises
    assert len(data) - keep <= 3
