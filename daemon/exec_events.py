"""Output event lines of ``/v1/exec/stream``, built without a JSON encoder on the hot path.

One :class:`OutputEncoder` per stream turns the bytes a pipe gives into whole
NDJSON lines ``{"type":"stdout","data":"...","offset":N}``, byte for byte
what ``json.dumps(event, ensure_ascii=False, separators=(",", ":"))`` gives
(a test holds the two together), at several hundred MB/s instead of the JSON
encoder's per-character loop:

- **64 KiB.** An event carries at most :data:`MAX_EVENT_BYTES` bytes of the
  command's output (the unit ``offset`` counts in), and its ``data`` is at
  most as many bytes of UTF-8 too: a piece with invalid bytes (each may become
  a 3-byte U+FFFD) is cut to a third of that first.
- **Whole characters.** A read may end inside a multibyte character; its
  first bytes wait for the next read (at most 3 bytes), so a character is never
  split into two replacement characters. A cut inside one read is made before
  a character's lead byte, where decoding the whole stream at once would also
  start a new character, so the text equals the whole stream decoded with
  replacement.
- **No JSON encoder on the hot path.** Text goes through ``orjson``'s string
  escaper (SIMD, about ten times ``json``'s on ordinary output). Output dense
  with newlines (``yes``, one-character lines) is ASCII escaped byte by byte,
  where orjson's one-escape-at-a-time path is slowest. ``codecs.escape_encode``
  (the ``codecs`` module's ``bytes`` escaper, there since Python 2 though not in
  the library reference: the tests pin its output byte for byte against
  ``json.dumps``) works on the bytes as they are (no decode, no ``str``) and
  spells ``\\n``, ``\\t``, ``\\r`` and ``\\\\`` as JSON does. Its ``\\'`` is turned back
  into ``'`` and ``"`` is escaped after; a piece with a control JSON writes
  ``\\u00XX`` (found with one ``memchr`` per control byte) goes to orjson.
"""

from __future__ import annotations

import codecs

import orjson

from .procs.utf8 import MAX_EVENT_BYTES, split_incomplete_tail

# Each invalid byte may become U+FFFD (3 bytes of UTF-8): a third keeps ``data`` within bounds.
_INVALID_PIECE = MAX_EVENT_BYTES // 3
# Above one newline in 8 bytes (judged on a sample), ``escape_encode`` beats orjson's
# one-escape-at-a-time path.
_DENSE = 8
_SAMPLE = 512
# Bytes ``escape_encode`` writes as ``\xNN`` where JSON wants ``\u00XX`` (or, for DEL, itself):
# one ``memchr`` each finds them faster than one pass that copies.
_SLOW_ASCII = tuple(bytes([b]) for b in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F))
_escape_encode = codecs.escape_encode


def json_string(piece: bytes) -> bytes:
    """``piece`` (whole characters, invalid bytes replaced) as a JSON string, quotes included:
    the bytes ``json.dumps(text, ensure_ascii=False)`` gives."""
    if piece.isascii():
        return _ascii_string(piece)
    return orjson.dumps(piece.decode("utf-8", errors="replace"))


def _ascii_string(piece: bytes) -> bytes:
    sample = piece[:_SAMPLE]
    if sample.count(b"\n") * _DENSE > len(sample) and not any(c in piece for c in _SLOW_ASCII):
        body: bytes = _escape_encode(piece)[0]
        if b"'" in piece:
            # A ``\'`` in the output is always an escaped quote: ``'`` never starts a token.
            body = body.replace(b"\\'", b"'")
        if b'"' in piece:
            body = body.replace(b'"', b'\\"')
        return b'"' + body + b'"'
    return orjson.dumps(piece.decode("ascii"))


def _cuts(data: bytes, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """``data[start:end]`` (whole characters) in spans of at most ``limit`` bytes, cut
    before a character's lead byte."""
    spans: list[tuple[int, int]] = []
    while start < end:
        stop = min(end, start + limit)
        if stop < end:
            window = max(start, stop - 4)
            stop = window + split_incomplete_tail(data[window:stop])
            if stop == start:  # cannot happen with limit >= 4; never loop forever
                stop = min(end, start + limit)
        spans.append((start, stop))
        start = stop
    return spans


class OutputEncoder:
    """One stream's bytes in, its complete event lines out (offsets exact)."""

    def __init__(self, stream: str) -> None:
        self._head = b'{"type":"' + stream.encode() + b'","data":'
        self._pending = b""  # the first bytes of a character the next read completes
        self.offset = 0

    def feed(self, data: bytes) -> list[bytes]:
        """Lines for ``data``; a character it ends inside is held back for the next call."""
        if self._pending:
            data = self._pending + data
        whole = split_incomplete_tail(data)
        self._pending = data[whole:]
        return self._lines(data, whole)

    def finish(self) -> list[bytes]:
        """The stream ended: a character left incomplete becomes U+FFFD."""
        data, self._pending = self._pending, b""
        return self._lines(data, len(data))

    def _lines(self, data: bytes, end: int) -> list[bytes]:
        lines: list[bytes] = []
        for start, stop in _cuts(data, 0, end, MAX_EVENT_BYTES):
            piece = data[start:stop] if (start, stop) != (0, len(data)) else data
            if piece.isascii():
                lines.append(self._line(piece, _ascii_string(piece)))
                continue
            try:
                text = piece.decode("utf-8")
            except UnicodeDecodeError:
                for sub_start, sub_stop in _cuts(piece, 0, len(piece), _INVALID_PIECE):
                    sub = piece[sub_start:sub_stop]
                    lines.append(self._line(sub, json_string(sub)))
                continue
            lines.append(self._line(piece, orjson.dumps(text)))
        return lines

    def _line(self, piece: bytes, string: bytes) -> bytes:
        line = b"".join((self._head, string, b',"offset":%d}\n' % self.offset))
        self.offset += len(piece)
        return line
