"""Turning a byte stream into text events without splitting a character.

A pipe read can end in the middle of a multibyte UTF-8 character; decoding
each read on its own would put a replacement character on both sides of the
cut. The incremental decoder holds the partial character back until the next
read completes it (or the stream ends, when it becomes U+FFFD). ``offset`` is
the byte offset in the command's output of the event's first byte, so a
client can tell exactly where each event sits even when invalid bytes were
replaced.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

MAX_EVENT_BYTES = 64 * 1024


@dataclass(frozen=True)
class TextChunk:
    data: str
    offset: int


class Utf8Chunker:
    """One stream's decoder: bytes in, ``(text, offset)`` out, characters whole."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._offset = 0

    def feed(self, data: bytes, final: bool = False) -> TextChunk | None:
        """Decode ``data``; None when nothing whole is ready yet."""
        pending_before = len(self._decoder.getstate()[0])
        text = self._decoder.decode(data, final)
        pending_after = len(self._decoder.getstate()[0])
        consumed = pending_before + len(data) - pending_after
        if not text:
            return None
        chunk = TextChunk(text, self._offset)
        self._offset += consumed
        return chunk

    def finish(self) -> TextChunk | None:
        """Flush a character left incomplete at the end of the stream (as U+FFFD)."""
        return self.feed(b"", final=True)


def split_incomplete_tail(data: bytes) -> int:
    """Length of the longest prefix of ``data`` that does not end inside a UTF-8 character."""
    end = len(data)
    for back in range(1, min(4, end) + 1):
        byte = data[end - back]
        if byte & 0xC0 != 0x80:  # a lead byte (or ASCII): does its sequence fit?
            need = (
                1
                if byte < 0x80
                else 2
                if byte >> 5 == 0b110
                else 3
                if byte >> 4 == 0b1110
                else 4
                if byte >> 3 == 0b11110
                else 1
            )
            return end if back >= need else end - back
    return end
