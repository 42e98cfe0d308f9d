"""Streaming decoders for response bodies, each producing output in bounded steps.

The scrubber must see a body decoded, and a compressed body must never be
able to make the proxy hold more than a bounded amount: 809 bytes of brotli
or 16 KiB of zstd decode to gigabytes. So:

- every decoder produces its output in steps of at most :data:`DECODE_STEP`
  bytes (zlib's ``max_length``; for brotli and zstd the streaming C API of the
  library each Python package ships, called through :mod:`ctypes` with a
  fixed output buffer: the Python bindings pinned by mitmproxy 11, Brotli
  1.1.0 and zstandard 0.23, have no output limit per call);
- after each step a :class:`DecodeBudget` is charged; past its total
  (``max_bytes``, default 1 GiB) or its sustained ratio (decoded bytes per
  encoded byte, with a burst allowance) it raises :class:`DecodedTooLarge`, so
  one upstream read never decodes to more than ``burst + ratio x read size``.
"""

from __future__ import annotations

import ctypes
import weakref
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

import brotli  # type: ignore[import-untyped]
import zstandard

DECODE_STEP = 256 * 1024
MAX_DECODED = 1 << 30
MAX_RATIO = 100
RATIO_BURST = 4 * 1024 * 1024


class DecodeError(ValueError):
    """The body is not valid in its declared content encoding."""


class DecodedTooLarge(DecodeError):
    """The decoded body passes the size or ratio limit (a compression bomb)."""


class DecodeBudget:
    """How much a body may still decode to.

    ``consumed(n)`` credits ``ratio * n`` bytes for ``n`` encoded bytes taken
    in (on top of at most ``burst`` carried over); ``produced(n)`` charges
    decoded bytes and raises :class:`DecodedTooLarge` once the body passes
    ``max_bytes`` in total or its credit runs out.
    """

    def __init__(
        self, max_bytes: int = MAX_DECODED, ratio: int = MAX_RATIO, burst: int = RATIO_BURST
    ) -> None:
        self.max_bytes = max_bytes
        self.ratio = ratio
        self.burst = burst
        self.total = 0
        self._credit = burst

    def consumed(self, n: int) -> None:
        self._credit = min(self.burst, self._credit) + self.ratio * n

    def produced(self, n: int) -> None:
        self.total += n
        self._credit -= n
        if self.total > self.max_bytes:
            raise DecodedTooLarge(f"the decoded body passes {self.max_bytes} bytes")
        if self._credit < 0:
            raise DecodedTooLarge(f"the body decodes to more than {self.ratio}x its encoded size")


class Decoder(Protocol):
    def decode(self, data: bytes) -> bytes: ...
    def finish(self) -> bytes: ...


class _ZlibDecoder:
    """gzip (members may be concatenated) and deflate (zlib-wrapped or raw)."""

    def __init__(self, budget: DecodeBudget, gzip: bool) -> None:
        self.budget = budget
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
                piece = self._d.decompress(data, DECODE_STEP)
                self.budget.produced(len(piece))
                out += piece
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


# --- brotli and zstd through their C streaming APIs ----------------------------------

_size_p = ctypes.POINTER(ctypes.c_size_t)


def _library(module: object, name: str) -> ctypes.CDLL:
    path = Path(getattr(module, "__file__", "")).parent
    found = sorted(path.glob(name))
    if not found:
        raise ImportError(f"{name} not found next to {module!r}")
    return ctypes.CDLL(str(found[0]))


def _brotli_lib() -> ctypes.CDLL:
    lib = _library(brotli, "_brotli*.so")
    lib.BrotliDecoderCreateInstance.restype = ctypes.c_void_p
    lib.BrotliDecoderCreateInstance.argtypes = [ctypes.c_void_p] * 3
    lib.BrotliDecoderDestroyInstance.argtypes = [ctypes.c_void_p]
    lib.BrotliDecoderDecompressStream.restype = ctypes.c_int
    lib.BrotliDecoderDecompressStream.argtypes = [
        ctypes.c_void_p,
        _size_p,
        ctypes.POINTER(ctypes.c_void_p),
        _size_p,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.c_void_p,
    ]
    lib.BrotliDecoderIsFinished.restype = ctypes.c_int
    lib.BrotliDecoderIsFinished.argtypes = [ctypes.c_void_p]
    return lib


def _zstd_lib() -> ctypes.CDLL:
    lib = _library(zstandard, "_cffi*.so")
    lib.ZSTD_createDCtx.restype = ctypes.c_void_p
    lib.ZSTD_freeDCtx.argtypes = [ctypes.c_void_p]
    lib.ZSTD_DCtx_setParameter.restype = ctypes.c_size_t
    lib.ZSTD_DCtx_setParameter.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.ZSTD_isError.restype = ctypes.c_uint
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    lib.ZSTD_decompressStream_simpleArgs.restype = ctypes.c_size_t
    lib.ZSTD_decompressStream_simpleArgs.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        _size_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
        _size_p,
    ]
    return lib


_BROTLI = _brotli_lib()
_ZSTD = _zstd_lib()
_BROTLI_ERROR, _BROTLI_SUCCESS, _BROTLI_MORE_INPUT, _BROTLI_MORE_OUTPUT = 0, 1, 2, 3
_ZSTD_WINDOW_LOG_MAX = 100  # ZSTD_d_windowLogMax
_ZSTD_WINDOW_LOG = 27  # 128 MiB, zstd's default limit for streaming


class _BrotliDecoder:
    def __init__(self, budget: DecodeBudget) -> None:
        self.budget = budget
        state = _BROTLI.BrotliDecoderCreateInstance(None, None, None)
        if not state:
            raise MemoryError("brotli decoder")
        self._state: int = state
        weakref.finalize(self, _BROTLI.BrotliDecoderDestroyInstance, state)
        self._seen = False
        self._done = False

    def decode(self, data: bytes) -> bytes:
        if not data:
            return b""
        self._seen = True
        if self._done:
            raise DecodeError("data after the end of a brotli stream")
        source = ctypes.create_string_buffer(data, len(data))
        avail_in = ctypes.c_size_t(len(data))
        next_in = ctypes.c_void_p(ctypes.addressof(source))
        sink = ctypes.create_string_buffer(DECODE_STEP)
        out = bytearray()
        while True:
            avail_out = ctypes.c_size_t(DECODE_STEP)
            next_out = ctypes.c_void_p(ctypes.addressof(sink))
            result = _BROTLI.BrotliDecoderDecompressStream(
                self._state,
                ctypes.byref(avail_in),
                ctypes.byref(next_in),
                ctypes.byref(avail_out),
                ctypes.byref(next_out),
                None,
            )
            if result == _BROTLI_ERROR:
                raise DecodeError("invalid brotli data")
            produced = DECODE_STEP - avail_out.value
            self.budget.produced(produced)
            out += sink.raw[:produced] if produced < DECODE_STEP else sink.raw
            if result == _BROTLI_SUCCESS:
                self._done = True
                if avail_in.value:
                    raise DecodeError("data after the end of a brotli stream")
                break
            if result == _BROTLI_MORE_INPUT:
                break
        return bytes(out)

    def finish(self) -> bytes:
        if self._seen and not self._done:
            raise DecodeError("brotli body ended early")
        return b""


class _ZstdDecoder:
    """zstd frames (possibly concatenated), window limited to 128 MiB."""

    def __init__(self, budget: DecodeBudget) -> None:
        self.budget = budget
        dctx = _ZSTD.ZSTD_createDCtx()
        if not dctx:
            raise MemoryError("zstd decoder")
        self._dctx: int = dctx
        weakref.finalize(self, _ZSTD.ZSTD_freeDCtx, dctx)
        _ZSTD.ZSTD_DCtx_setParameter(dctx, _ZSTD_WINDOW_LOG_MAX, _ZSTD_WINDOW_LOG)
        self._in_frame = False

    def decode(self, data: bytes) -> bytes:
        if not data:
            return b""
        sink = ctypes.create_string_buffer(DECODE_STEP)
        src_pos = ctypes.c_size_t(0)
        out = bytearray()
        while True:
            dst_pos = ctypes.c_size_t(0)
            hint = _ZSTD.ZSTD_decompressStream_simpleArgs(
                self._dctx,
                sink,
                DECODE_STEP,
                ctypes.byref(dst_pos),
                data,
                len(data),
                ctypes.byref(src_pos),
            )
            if _ZSTD.ZSTD_isError(hint):
                raise DecodeError("invalid zstd data")
            produced = dst_pos.value
            self.budget.produced(produced)
            out += sink.raw[:produced] if produced < DECODE_STEP else sink.raw
            self._in_frame = hint != 0
            if produced < DECODE_STEP and src_pos.value >= len(data):
                break
        return bytes(out)

    def finish(self) -> bytes:
        if self._in_frame:
            raise DecodeError("zstd body ended early")
        return b""


_DECODERS: dict[str, Callable[[DecodeBudget], Decoder]] = {
    "gzip": lambda b: _ZlibDecoder(b, gzip=True),
    "x-gzip": lambda b: _ZlibDecoder(b, gzip=True),
    "deflate": lambda b: _ZlibDecoder(b, gzip=False),
    "br": _BrotliDecoder,
    "zstd": _ZstdDecoder,
}


def parse_codings(header: str | None) -> list[str]:
    """Codings in the order they were applied (``identity`` dropped)."""
    if not header:
        return []
    codings = [c.strip().lower() for c in header.split(",")]
    return [c for c in codings if c and c != "identity"]


def supported(codings: Iterable[str]) -> bool:
    return all(c in _DECODERS for c in codings)


class ChainDecoder:
    """Undo ``codings`` (applied left to right) as a stream, within ``budget``.

    One budget covers every stage: the credit comes from the encoded bytes
    entering the chain, and every stage's output is charged, so a coding
    stacked on another cannot multiply what one read decodes to.
    """

    def __init__(self, codings: list[str], budget: DecodeBudget | None = None) -> None:
        unknown = [c for c in codings if c not in _DECODERS]
        if unknown:
            raise DecodeError(f"unsupported content encoding {unknown[0]!r}")
        self.budget = budget or DecodeBudget()
        self._stages = [_DECODERS[c](self.budget) for c in reversed(codings)]

    def decode(self, data: bytes) -> bytes:
        self.budget.consumed(len(data))
        for stage in self._stages:
            data = stage.decode(data)
        return data

    def finish(self) -> bytes:
        data = b""
        for stage in self._stages:
            data = stage.decode(data) + stage.finish()
        return data
