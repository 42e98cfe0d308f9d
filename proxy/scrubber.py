"""The one matcher that keeps real tokens out of what the sandbox reads.

Everything the proxy relays back to a sandbox on an intercepted host passes
through here: header names and values, reason phrases, trailers, buffered and
streamed bodies, WebSocket messages and control frames.

- :func:`token_forms` lists every form of a real token worth hiding and what
  the sandbox sees instead: the token itself, the Basic credential
  ``base64(user:token)`` and plain ``base64(token)`` (standard and URL-safe
  alphabets, at each of the three byte alignments a value can have inside a
  larger base64 text).
- :func:`scrub` replaces every form in one buffer (longest form first). A form
  may be wrapped across lines as MIME (76 columns), PEM (64) or other encoders
  (60) wrap base64: line breaks (CRLF or LF) inside an occurrence are ignored
  when matching (:func:`find_forms`) and kept where they were in the
  replacement.
- :class:`StreamScrubber` does the same over a stream of chunks, holding back
  the bytes at a chunk's end that could begin a form (around an occurrence,
  ``len(longest form) - 1`` bytes) so a token split across chunks is caught
  (and cutting only between occurrences, so a stream is rewritten exactly as
  the whole body would be),
  after decoding the stream's content encodings (gzip, deflate, br, zstd) with
  bounded, incremental decoders: compression cannot hide a token, and a body
  is never buffered whole. Decoders produce output in bounded steps and a
  :class:`DecodeBudget` cuts a body whose decoded size passes a limit or a
  sustained ratio (a compression bomb) with :class:`DecodedTooLarge`.
- :class:`Forms` is the matcher itself, prepared once per token set: one
  pass per buffer over the minimal forms (every other form contains one),
  line breaks inside allowed (compiled, :mod:`airlock.proxy.form_scan`, once
  ready; in Python over the text without line breaks until then), exact
  spans (:func:`find_forms`) only around a hit. It and
  :func:`partial_form_at_end` are shared with the connection-level guard
  (:mod:`airlock.proxy.guard`).

The pairs mapping is read live: a token swapped on the connection after a
stream started is scrubbed from then on.
"""

from __future__ import annotations

import base64
import bisect
import re
from collections.abc import Callable, Iterable, Mapping

from . import form_scan
from .decoders import (
    ChainDecoder,
    DecodeBudget,
    DecodedTooLarge,
    DecodeError,
    Decoder,
    parse_codings,
    supported,
)

__all__ = [
    "ChainDecoder",
    "DecodeBudget",
    "DecodeError",
    "DecodedTooLarge",
    "Decoder",
    "Forms",
    "StreamScrubber",
    "find_forms",
    "minimal_forms",
    "ordered_forms",
    "parse_codings",
    "partial_form_at_end",
    "scrub",
    "scrub_name",
    "supported",
    "token_forms",
    "wrap_room",
]

# A base64 alignment core shorter than this is too generic to rewrite safely.
MIN_CORE = 12


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


def ordered_forms(pairs: Mapping[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    return sorted(((k, v) for k, v in pairs.items() if k), key=lambda kv: -len(kv[0]))


# Line breaks a base64 encoder puts inside a long value (MIME, PEM): CRLF or LF, and
# for the matcher any run of CR and LF bytes (a lone CR too: ignoring more can only
# find more, and the compiled matcher, proxy/form_scan.py, reads breaks the same way).
_BREAK = re.compile(rb"[\r\n]+")
# How many line breaks a held-back tail must leave room for, per byte of the
# longest form: a form wrapped at 16 columns or more is still caught across
# any chunk boundary (MIME wraps at 76, PEM at 64, some encoders at 60).
MIN_WRAP_COLUMNS = 16

Span = tuple[int, int, bytes]  # (start, end, what the form is replaced with)


def wrap_room(longest: int) -> int:
    """Bytes of line breaks a form of ``longest`` bytes can carry when wrapped."""
    return 2 * (longest // MIN_WRAP_COLUMNS + 1)


def _literal_spans(data: bytes, ordered: list[tuple[bytes, bytes]]) -> list[Span]:
    spans: list[Span] = []
    for real, placeholder in ordered:
        i = data.find(real)
        while i != -1:
            spans.append((i, i + len(real), placeholder))
            i = data.find(real, i + len(real))
    return spans


def _wrapped_spans(data: bytes, ordered: list[tuple[bytes, bytes]]) -> list[Span]:
    """Occurrences with line breaks inside, mapped back to ``data``'s offsets.

    The replacement carries the same breaks at the same offsets (as far as it
    reaches), so wrapped text stays wrapped.
    """
    breaks = [(m.start(), m.end()) for m in _BREAK.finditer(data)]
    stripped = _BREAK.sub(b"", data)
    at: list[int] = []  # stripped offset each break sits before
    removed = [0]  # bytes removed by the first k breaks
    for start, end in breaks:
        at.append(start - removed[-1])
        removed.append(removed[-1] + end - start)

    def original(i: int) -> int:
        return i + removed[bisect.bisect_right(at, i)]

    spans: list[Span] = []
    for real, placeholder in ordered:
        i = stripped.find(real)
        while i != -1:
            start, end = original(i), original(i + len(real) - 1) + 1
            if end - start != len(real):  # breaks inside: put them back in the replacement
                out, pos, shift = bytearray(), 0, 0
                for s, e in breaks:
                    if start < s and e <= end:
                        k = min(s - start - shift, len(placeholder))
                        out += placeholder[pos:k] + data[s:e]
                        pos, shift = k, shift + e - s
                out += placeholder[pos:]
                spans.append((start, end, bytes(out)))
            i = stripped.find(real, i + len(real))
    return spans


def minimal_forms(ordered: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Forms that contain no other form: matching these finds every form, and
    a partial match always starts on secret bytes (``base64("user:")`` is not)."""
    keys = [k for k, _ in ordered]
    return [(k, v) for k, v in ordered if not any(o != k and o in k for o in keys)]


def _flat(data: bytes) -> bytes:
    """``data`` without CR and LF bytes. Two one-byte replaces are the fastest way:
    ``translate`` with deletions and a two-byte ``replace(b"\\r\\n", ...)`` are 10-20x
    slower."""
    return data.replace(b"\n", b"").replace(b"\r", b"") if _has_break(data) else data


def _has_break(data: bytes) -> bool:
    return b"\n" in data or b"\r" in data


class Forms:
    """The real forms of a scrub map, prepared once for matching.

    Searching is the hot path of every streamed body (twice: the stream
    scrubber and the guard), so a buffer is first checked in one pass for
    the *minimal* forms only (every form contains one; the base64 forms of a
    token at its three alignments and the Basic forms reduce to a handful),
    over its text without line breaks (so wrapped forms are seen too). Only
    on a hit are the exact spans worked out. Build one per map and rebuild it
    only when the map changes (:meth:`stale`).
    """

    def __init__(self, pairs: Mapping[bytes, bytes]) -> None:
        self.count = len(pairs)
        self.ordered = ordered_forms(pairs)
        self.minimal = minimal_forms(self.ordered)
        self._needles = tuple(k for k, _ in self.minimal)
        self.longest = max((len(k) for k, _ in self.ordered), default=0)
        # A form's bytes and line breaks: nothing else can be part of a form.
        self._alphabet = bytes(
            set(b"".join([*self._needles, *(k for k, _ in self.ordered)])) | {13, 10}
        )
        self._reach = self.longest - 1 + wrap_room(self.longest) if self.longest else 0
        self._compiled: form_scan.Scanner | None = None  # kept once the set is compiled

    def stale(self, pairs: Mapping[bytes, bytes]) -> bool:
        """Whether ``pairs`` changed since (maps only ever grow: a new swap)."""
        return len(pairs) != self.count

    def _scanner(self) -> form_scan.Scanner | None:
        """The compiled scanner, asked of the cache until it is ready, then held here
        (no lock or lookup per buffer after that)."""
        if self._compiled is None:
            self._compiled = form_scan.scanner_for(self._needles)
        return self._compiled

    def present(self, data: bytes) -> bool:
        """Whether a form occurs in ``data``, line breaks inside allowed."""
        if not self._needles or not data:
            return False
        scanner = self._scanner()
        if scanner is not None:
            return scanner.found(data)
        flat = _flat(data)
        return any(needle in flat for needle in self._needles)

    def partial_at_end(self, data: bytes) -> int:
        """:func:`partial_form_at_end` over every form, after a cheap cut: the
        start of a form is made of form bytes and line breaks only, so only the
        trailing run of those is searched (usually a few bytes, or none)."""
        window = data[-self._reach :] if self._reach else b""
        run = len(window) - len(window.rstrip(self._alphabet))
        return partial_form_at_end(window[-run:], self.ordered) if run else 0

    def find(self, data: bytes) -> list[Span]:
        """Every occurrence (see :func:`find_forms`); ``[]`` after one cheap pass."""
        if not self._needles or not data:
            return []
        scanner = self._scanner()
        if scanner is None:
            return find_forms(data, self.ordered) if self.present(data) else []
        ends = scanner.ends(data)
        return self._around(data, ends) if ends else []

    def _around(self, data: bytes, ends: list[int]) -> list[Span]:
        """:func:`find_forms` on windows around the ends of minimal forms.

        Every occurrence of a form contains one of a minimal form, and lies
        within ``longest`` bytes other than line breaks on either side of
        where that one ends, so a window that holds as many is searched
        instead of the whole buffer. Windows that touch are merged, so
        occurrences that overlap are decided together, exactly as over the
        whole buffer. A window short of that many (a run of line breaks
        longer than any wrapping) sends the whole buffer to
        :func:`find_forms` instead.
        """
        longest, size = self.longest, len(data)
        span = longest + wrap_room(longest)
        windows: list[list[int]] = []
        for end in ends:
            lo, hi = max(0, end - span), min(size, end + span)
            enough_before = lo == 0 or _non_breaks(data[lo:end]) >= longest
            enough_after = hi == size or _non_breaks(data[end:hi]) >= longest
            if not (enough_before and enough_after):
                return find_forms(data, self.ordered)
            if windows and lo <= windows[-1][1]:
                windows[-1][1] = max(windows[-1][1], hi)
            else:
                windows.append([lo, hi])
        return [
            (start + lo, stop + lo, shown)
            for lo, hi in windows
            for start, stop, shown in find_forms(data[lo:hi], self.ordered)
        ]

    def scrub(self, data: bytes) -> bytes:
        return _replace(data, self.find(data))


def find_forms(data: bytes, ordered: list[tuple[bytes, bytes]]) -> list[Span]:
    """Every occurrence of a real form in ``data``, line breaks inside included:
    sorted, non-overlapping, the longest form winning where two overlap."""
    if not ordered or not data:
        return []
    if _has_break(data):
        # Literal and wrapped occurrences are found in the text without line
        # breaks; the exact offsets are worked out only for wrapped ones.
        flat = _flat(data)
        hits = [real for real, _ in ordered if real in flat]
        if not hits:
            return []
        spans = _literal_spans(data, ordered)
        if any(flat.count(real) != data.count(real) for real in hits):
            spans += _wrapped_spans(data, ordered)
    else:
        spans = _literal_spans(data, ordered)
    if not spans:
        return []
    # Longest first (``ordered`` is), then by position; drop overlaps.
    spans.sort(key=lambda s: (-(s[1] - s[0]), s[0]))
    chosen: list[Span] = []
    for span in spans:
        if all(span[1] <= c[0] or span[0] >= c[1] for c in chosen):
            chosen.append(span)
    chosen.sort()
    return chosen


def partial_form_at_end(data: bytes, ordered: list[tuple[bytes, bytes]]) -> int:
    """Length of the longest suffix of ``data`` that a form could continue
    (a proper prefix of one, line breaks inside allowed); 0 when none."""
    if not ordered or not data:
        return 0
    longest = max(len(real) for real, _ in ordered)
    window = data[-(longest - 1 + wrap_room(longest)) :]
    pending = b""
    if window.endswith(b"\r"):  # a CRLF may be cut in half
        window, pending = window[:-1], b"\r"
    stripped = _BREAK.sub(b"", window)
    best = 0
    for real, _ in ordered:
        first = real[:1]
        i = stripped.find(first, max(0, len(stripped) - len(real) + 1))
        while i != -1:
            if real.startswith(stripped[i:]):
                best = max(best, len(stripped) - i)
                break
            i = stripped.find(first, i + 1)
    if not best:
        return 0
    # Map the stripped suffix length back to bytes of ``window``.
    count, n = 0, len(window)
    while count < best:
        n -= 1
        if window[n : n + 1] not in (b"\r", b"\n"):
            count += 1
    return len(window) - n + len(pending)


def _non_breaks(piece: bytes) -> int:
    """How many bytes of ``piece`` are not CR or LF."""
    return len(piece) - piece.count(b"\n") - piece.count(b"\r")


def _apply(data: bytes, ordered: list[tuple[bytes, bytes]]) -> bytes:
    return _replace(data, find_forms(data, ordered))


def _replace(data: bytes, spans: list[Span]) -> bytes:
    """``data`` with each span (sorted, not overlapping) replaced by its shown form."""
    if not spans:
        return data
    out = bytearray()
    last = 0
    for start, end, placeholder in spans:
        out += data[last:start]
        out += placeholder
        last = end
    out += data[last:]
    return bytes(out)


def scrub(data: bytes, pairs: Mapping[bytes, bytes]) -> bytes:
    """``data`` with every real form replaced (longest first)."""
    if not pairs or not data:
        return data
    return _apply(data, ordered_forms(pairs))


def _literal(value: bytes) -> Callable[[re.Match[bytes]], bytes]:
    return lambda _match: value


def scrub_name(name: bytes, pairs: Mapping[bytes, bytes]) -> bytes:
    """:func:`scrub` for header names, which are case-insensitive: HTTP/2
    lower-cases them, so a token reflected into a name is matched in any case."""
    if not pairs or not name:
        return name
    lowered = name.lower()
    for real, placeholder in ordered_forms(pairs):
        if real.lower() in lowered:
            name = re.compile(re.escape(real), re.I).sub(_literal(placeholder), name)
            lowered = name.lower()
    return name


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
        self._forms = Forms({})
        self._keep = 0

    def _refresh(self) -> None:
        if self._forms.stale(self.pairs):
            self._forms = Forms(self.pairs)
            longest = self._forms.longest
            self._keep = longest - 1 + wrap_room(longest) if longest else 0

    def __call__(self, chunk: bytes) -> list[bytes]:
        if chunk:
            data = self.decoder.decode(chunk) if self.decoder is not None else chunk
            if not data:
                return []
            return self._feed(data)
        data = self.decoder.finish() if self.decoder is not None else b""
        self._refresh()
        out = self._forms.scrub(self.tail + data)
        self.tail = b""
        return [out] if out else []

    def _feed(self, data: bytes) -> list[bytes]:
        """Scrub ``tail + data``, holding back only what must wait for more.

        The usual chunk holds no form and does not end on the start of one: it
        goes out as it came (no copy). When it ends on bytes a form could
        continue, just those wait; around an occurrence, the last ``keep``
        bytes wait (an occurrence is never cut, and the next chunk may extend
        it to a longer form).
        """
        self._refresh()
        keep, forms = self._keep, self._forms
        if self.tail:
            data = self.tail + data
        if not forms.present(data):
            # Every form across the end starts on a suffix that is a proper
            # prefix of it: hold the longest such suffix (usually none).
            hold = forms.partial_at_end(data)
            self.tail = data[len(data) - hold :] if hold else b""
            out = data[: len(data) - hold] if hold else data
            return [out] if out else []
        cut = len(data) - keep
        spans = forms.find(data)
        for start, end, _ in spans:
            if start < cut < end:  # never cut through an occurrence
                cut = end
        cut = max(cut, 0)
        self.tail = data[cut:]
        # No span crosses the cut: those before it are exactly data[:cut]'s.
        out = _replace(data[:cut], [sp for sp in spans if sp[1] <= cut])
        return [out] if out else []
