"""Splitting an NDJSON response into lines as its chunks arrive, in linear time.

A line can be far longer than a chunk (an exec stream's event is up to 64 KiB
of output, several times that once escaped): joining every chunk to what is
pending and splitting the whole again would rescan a long line once per
chunk. Only the new chunk is searched for newlines here.
"""

from __future__ import annotations


class LineSplitter:
    """Bytes in, whole non-blank lines (without their newline) out."""

    def __init__(self) -> None:
        self._partial: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if self._partial:
                self._partial.append(chunk[start:end])
                line = b"".join(self._partial)
                self._partial = []
            else:
                line = chunk[start:end]
            if line.strip():
                lines.append(line)
            start = end + 1
        if start < len(chunk):
            self._partial.append(chunk[start:])
        return lines
