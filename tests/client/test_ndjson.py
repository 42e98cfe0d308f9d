"""The NDJSON line splitter the exec and watch streams share (client/ndjson.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airlock.client.ndjson import LineSplitter


@given(st.lists(st.sampled_from([b"a", b"{}", b"\n", b" ", b"xyz" * 50]), max_size=200), st.data())
def test_lines_come_out_whole_however_the_chunks_fall(
    parts: list[bytes], data: st.DataObject
) -> None:
    stream = b"".join(parts) + b"\n"
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    splitter = LineSplitter()
    got: list[bytes] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        got += splitter.feed(stream[start:end])
    assert got == [line for line in stream.split(b"\n") if line.strip()]


def test_a_line_longer_than_its_chunks() -> None:
    splitter = LineSplitter()
    line = b"x" * 100_000
    out: list[bytes] = []
    for i in range(0, len(line), 4096):
        out += splitter.feed(line[i : i + 4096])
    assert out == []
    assert splitter.feed(b"\n\n  \nnext") == [line]
    assert splitter.feed(b"\n") == [b"next"]
