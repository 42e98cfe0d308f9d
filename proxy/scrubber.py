"""The one matcher that keeps real tokens out of what the sandbox reads.

Everything the proxy relays back to a sandbox on an intercepted host passes
through here: header names and values, reason phrases, trailers, buffered and
streamed bodies, WebSocket messages and control frames.

- :func:`token_forms` lists every form of a real token worth hiding and what
  the sandbox sees instead: the token itself, the Basic credential
  ``base64(user:token)`` and plain ``base64(token)`` (standard and URL-safe
  alphabets, at each of the three byte alignments a value can have inside a
  larger base64 text).
- :func:`scrub` replaces every form in one buffer (longest form first).
- :class:`StreamScrubber` does the same over a stream of chunks, holding back
  ``len(longest form) - 1`` bytes so a token split across chunks is caught
  (and cutting only between occurrences, so a stream is rewritten exactly as
  the whole body would be),
  after decoding the stream's content encodings (gzip, deflate, br, zstd) with
  bounded, incremental decoders: compression cannot hide a token, and a body
  is never buffered whole.

The pairs mapping is read live: a token swapped on the connection after a
stream started is scrubbed from then on.
"""

from __future__ import annotations

import base64
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import brotli  # type: ignore[import-untyped]
import zstandard

# A base64 alignment core shorter than this is too generic to rewrite safely.
MIN_CORE = 12
# Largest piece a decoder produces per step: decompression bombs stay bounded.
DECODE_PIECE = 1 << 20


def _b64_cores(raw: bytes, encode: Callable[[bytes], bytes]) -> list[bytes]:
    """The part of ``encode(... + raw + ...)`` that depends only on ``raw``,
    for each offset of ``raw`` modulo 3 inside a larger encoded value."""
    cores = []
    for k in range(3):
        encoded = encode(b"\0" * k + raw)
        total = k + len(raw)
        cores.append(encoded[4 if k else 0 : 4 * (total // 3)])
    return cores


def token_forms(real: str, placeholder: str, usernames: Iterable[str] = ()) -> dict[bytes, bytes]:
    """Every form of ``real`` to hide, mapped to the same form of ``placeholder``.

    ``usernames`` are the Basic user names the token travels with (the lease's
    and the one the sandbox sent), so ``base64(user:token)`` is covered.
    """
    pairs: dict[bytes, bytes] = {real.encode(): placeholder.encode()}
    sources = [(real.encode(), placeholder.encode())]
    for user in dict.fromkeys(usernames):
        sources.append((f"{user}:{real}".encode(), f"{user}:{placeholder}".encode()))
    for r, p in sources:
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            pairs.setdefault(encode(r), encode(p))
            for rc, pc in zip(_b64_cores(r, encode), _b64_cores(p, encode), strict=True):
                if len(rc) >= MIN_CORE:
                    pairs.setdefault(rc, pc)
    return pairs


def _ordered(pairs: Mapping[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    return sorted(((k, v) for k, v in pairs.items() if k), key=lambda kv: -len(kv[0]))


def _apply(data: bytes, ordered: list[tuple[bytes, bytes]]) -> bytes:
    for real, placeholder in ordered:
        if real in data:
            data = data.replace(real, placeholder)
    return data


def scrub(data: bytes, pairs: Mapping[bytes, bytes]) -> bytes:
    """``data`` with every real form replaced (longest first)."""
    if not pairs or not data:
        return data
    return _apply(data, _ordered(pairs))


def _literal(value: bytes) -> Callable[[re.Match[bytes]], bytes]:
    return lambda _match: value


def scrub_name(name: bytes, pairs: Mapping[bytes, bytes]) -> bytes:
    """:func:`scrub` for header names, which are case-insensitive: HTTP/2
    lower-cases them, so a token reflected into a name is matched in any case."""
    if not pairs or not name:
        return name
    lowered = name.lower()
    for real, placeholder in _ordered(pairs):
        if real.lower() in lowered:
            name = re.compile(re.escape(real), re.I).sub(_literal(placeholder), name)
            lowered = name.lower()
    return name


# --- streaming decoders ------------------------------------------------------------


class DecodeError(ValueError):
    """The body is not valid in its declared content encoding."""


class Decoder(Protocol):
    def decode(self, data: bytes) -> bytes: ...
    def finish(self) -> bytes: ...


class _ZlibDecoder:
    """gzip (members may be concatenated) and deflate (zlib-wrapped or raw)."""

    def __init__(self, gzip: bool) -> None:
        self.gzip = gzip
        self._head = b""
        self._d: zlib._Decompress | None = zlib.decompressobj(31) if gzip else None
        self._seen = False

    def _start_deflate(self) -> bool:
        if len(self._head) < 2:
            return False
        b0, b1 = self._head[0], self._head[1]
        zlib_wrapped = (b0 & 0x0F) == 8 and (b0 * 256 + b1) % 31 == 0
        self._d = zlib.decompressobj(15 if zlib_wrapped else -15)
        return True

    def decode(self, data: bytes) -> bytes:
        if not data:
            return b""
        self._seen = True
        if self._d is None:
            self._head += data
            if not self._start_deflate():
                return b""
            data, self._head = self._head, b""
        out = bytearray()
        try:
            while data:
                assert self._d is not None
                out += self._d.decompress(data, DECODE_PIECE)
                data = self._d.unconsumed_tail
                if self._d.eof:
                    rest = self._d.unused_data + data
                    if not rest:
                        break
                    if not self.gzip:
                        raise DecodeError("data after the end of a deflate stream")
                    self._d = zlib.decompressobj(31)
                    data = rest
        except zlib.error as exc:
            raise DecodeError(str(exc)) from None
        return bytes(out)

    def finish(self) -> bytes:
        if not self._seen:
            return b""
        if self._d is None or not self._d.eof:
            raise DecodeError("compressed body ended early")
        return b""


class _BrotliDecoder:
    def __init__(self) -> None:
        self._d = brotli.Decompressor()
        self._seen = False

    def decode(self, data: bytes) -> bytes:
        if not data:
            return b""
        self._seen = True
        try:
            return bytes(self._d.process(data))
        except brotli.error as exc:
            raise DecodeError(str(exc)) from None

    def finish(self) -> bytes:
        if self._seen and not self._d.is_finished():
            raise DecodeError("brotli body ended early")
        return b""


class _ZstdDecoder:
    def __init__(self) -> None:
        self._factory = zstandard.ZstdDecompressor(max_window_size=1 << 27)
        self._d = self._factory.decompressobj()
        self._in_frame = False

    def decode(self, data: bytes) -> bytes:
        out = bytearray()
        try:
            while data:
                out += self._d.decompress(data)
                self._in_frame = True
                if not self._d.eof:
                    break
                self._in_frame = False
                data = self._d.unused_data
                self._d = self._factory.decompressobj()
        except zstandard.ZstdError as exc:
            raise DecodeError(str(exc)) from None
        return bytes(out)

    def finish(self) -> bytes:
        if self._in_frame:
            raise DecodeError("zstd body ended early")
        return b""


_DECODERS: dict[str, Callable[[], Decoder]] = {
    "gzip": lambda: _ZlibDecoder(gzip=True),
    "x-gzip": lambda: _ZlibDecoder(gzip=True),
    "deflate": lambda: _ZlibDecoder(gzip=False),
    "br": _BrotliDecoder,
    "zstd": _ZstdDecoder,
}


def parse_codings(header: str | None) -> list[str]:
    """Content codings in the order they were applied (``identity`` dropped)."""
    if not header:
        return []
    codings = [c.strip().lower() for c in header.split(",")]
    return [c for c in codings if c and c != "identity"]


def supported(codings: Iterable[str]) -> bool:
    return all(c in _DECODERS for c in codings)


class ChainDecoder:
    """Undo ``codings`` (applied left to right) as a stream."""

    def __init__(self, codings: list[str]) -> None:
        unknown = [c for c in codings if c not in _DECODERS]
        if unknown:
            raise DecodeError(f"unsupported content encoding {unknown[0]!r}")
        self._stages = [_DECODERS[c]() for c in reversed(codings)]

    def decode(self, data: bytes) -> bytes:
        for stage in self._stages:
            data = stage.decode(data)
        return data

    def finish(self) -> bytes:
        data = b""
        for stage in self._stages:
            data = stage.decode(data) + stage.finish()
        return data


# --- the stream scrubber -----------------------------------------------------------


class StreamScrubber:
    """mitmproxy ``stream`` callable: decode, scrub with a carry-over window.

    Called with each chunk and finally with ``b""``; returns the list of
    chunks to send (never an empty chunk: for chunked HTTP/1 that would end the
    body early). A decode error raises :class:`DecodeError`; the caller aborts
    the stream rather than relay bytes it could not inspect.
    """

    def __init__(self, pairs: Mapping[bytes, bytes], decoder: Decoder | None = None) -> None:
        self.pairs = pairs
        self.decoder = decoder
        self.tail = b""
        self._count = -1
        self._ordered: list[tuple[bytes, bytes]] = []
        self._keep = 0

    def _refresh(self) -> None:
        if len(self.pairs) != self._count:
            self._count = len(self.pairs)
            self._ordered = _ordered(self.pairs)
            self._keep = max((len(k) for k, _ in self._ordered), default=1) - 1

    def __call__(self, chunk: bytes) -> list[bytes]:
        if chunk:
            data = self.decoder.decode(chunk) if self.decoder is not None else chunk
            if not data:
                return []
            return self._feed(data)
        data = self.decoder.finish() if self.decoder is not None else b""
        self._refresh()
        out = _apply(self.tail + data, self._ordered)
        self.tail = b""
        return [out] if out else []

    def _feed(self, data: bytes) -> list[bytes]:
        self._refresh()
        if self.tail:
            data = self.tail + data
        keep = self._keep
        if len(data) <= keep:
            self.tail = data
            return []
        cut = self._safe_cut(data, len(data) - keep)
        self.tail = data[cut:]
        out = _apply(data[:cut], self._ordered)
        return [out] if out else []

    def _safe_cut(self, data: bytes, cut: int) -> int:
        """Move ``cut`` past every form occurrence that straddles it.

        Any occurrence starting before ``len(data) - keep`` lies wholly inside
        ``data``, so the emitted part is replaced exactly as the whole body
        would be, and the held-back tail (kept unreplaced) holds only forms
        that start in it.
        """
        moved = True
        while moved:
            moved = False
            for needle, _ in self._ordered:
                n = len(needle)
                i = data.find(needle, max(0, cut - n + 1), cut + n - 1)
                while i != -1 and i < cut:
                    if i + n > cut:
                        cut = i + n
                        moved = True
                    i = data.find(needle, i + 1, cut + n - 1)
        return cut
