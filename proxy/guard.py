"""The last line: what an intercepted tunnel may send to the sandbox, checked byte by byte.

Every hook of the proxy (swap, scrub, trailers, upgrades...) works on
mitmproxy's flows. Any path a hook does not see (a status that "has no body"
but gets one anyway, a coding mitmproxy relays as is) would reach the sandbox
unchecked. :class:`ResponseGuard` sits below all of them, on the plaintext
bytes of one intercepted tunnel just before they are encrypted for the
sandbox (mitmproxy is wired to it in :mod:`airlock.proxy.mitm`; this module
knows nothing of mitmproxy). It:

- parses the HTTP/1.1 response framing itself: status line, header fields,
  ``Content-Length``, chunked (size lines, data, trailers) or close-delimited
  bodies, interim ``1xx`` heads, and no body at all for ``204``, ``304`` and
  answers to ``HEAD`` (the request methods are told to it in order, by
  :meth:`ResponseGuard.request`). After ``101`` the rest of the stream
  (WebSocket frames) is opaque but still matched;
- refuses any content coding or transfer coding but identity and chunked
  (the hooks decode what they accept; what is still encoded cannot be
  checked), a WebSocket extension (``permessage-deflate`` would hide the
  frames' payload), and any framing it cannot follow;
- runs every byte through the scrubber's matcher
  (:class:`airlock.proxy.scrubber.Forms`) with the connection's live map
  of real forms: heads, trailers and the body (across chunks: chunk framing
  is taken out so a form split over two chunks is still one form), and each
  chunk size line on its own. Bytes at the end of a write that could begin a
  form (at least :data:`HOLD_MIN` bytes of one) are held until the next
  write says whether they do; a message that ends on such bytes is a
  violation.

A violation raises :class:`GuardViolation`; from then on the guard lets
nothing through, and the caller closes the tunnel.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable, Iterator, Mapping

from .scrubber import Forms, parse_codings, partial_form_at_end, wrap_room

# A suffix shorter than this that could begin a form is let through: holding
# every one- or two-byte coincidence would stall streams. A held prefix of a
# form is never more than this short of a full match's secret part.
HOLD_MIN = 16
MAX_HEAD = 256 * 1024
MAX_LINE = 8 * 1024

_STATUS = re.compile(rb"HTTP/1\.[01] ([1-5][0-9][0-9])(?: [^\r\n]*)?")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(?:;[^\r\n]*)?")

HEAD, BODY, CHUNK_SIZE, CHUNK_DATA, CHUNK_END, TRAILERS, UNTIL_CLOSE, OPAQUE = range(8)

# (raw bytes, matched as part of the content stream). Body pieces are views
# of the write they came in (no copy of a body on the hot path).
Piece = tuple[bytes | memoryview, bool]


class GuardViolation(Exception):
    """The stream broke a rule; ``reason`` is a short fixed word for the audit log."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class _Framing:
    """HTTP/1.1 response framing, fed the bytes as they are written."""

    def __init__(self, guard: ResponseGuard) -> None:
        self.guard = guard
        self.state = HEAD
        self.left = 0  # bytes left in a Content-Length body or a chunk
        self.buf = bytearray()  # the head, trailer block or line being read
        self.status_ok = False  # the head's status line has been checked

    @property
    def at_boundary(self) -> bool:
        return self.state == HEAD and not self.buf

    def feed(self, data: bytes) -> list[Piece]:
        pieces: list[Piece] = []
        i, n = 0, len(data)
        view = memoryview(data)
        while i < n:
            state = self.state
            if state in (UNTIL_CLOSE, OPAQUE):
                pieces.append((view[i:] if i else data, True))
                break
            if state in (BODY, CHUNK_DATA):
                take = min(self.left, n - i)
                pieces.append((view[i : i + take] if take < n else data, True))
                self.left -= take
                i += take
                if not self.left:
                    self.state = HEAD if state == BODY else CHUNK_END
                continue
            if state == CHUNK_END:
                take = min(2 - len(self.buf), n - i)
                self.buf += data[i : i + take]
                if not b"\r\n".startswith(bytes(self.buf)):
                    raise GuardViolation("framing", "chunk data not followed by CRLF")
                pieces.append((data[i : i + take], False))
                i += take
                if len(self.buf) == 2:
                    self.buf.clear()
                    self.state = CHUNK_SIZE
                continue
            if state == CHUNK_SIZE:
                end = data.find(b"\n", i)
                take = (end + 1 if end != -1 else n) - i
                self.buf += data[i : i + take]
                if len(self.buf) > MAX_LINE:
                    raise GuardViolation("framing", "chunk size line too long")
                pieces.append((data[i : i + take], False))
                i += take
                if end != -1:
                    self._chunk_size(bytes(self.buf))
                    self.buf.clear()
                continue
            # HEAD or TRAILERS: read up to the blank line that ends the block.
            start = max(0, len(self.buf) - 3)
            self.buf += data[i:]
            end = self.buf.find(b"\r\n\r\n", start)
            if state == TRAILERS and self.buf[:2] == b"\r\n":
                end = -2  # no trailer fields: the block is one CRLF
            used = len(self.buf) if end == -1 else end + 4
            taken = used - (len(self.buf) - (n - i))
            block = bytes(self.buf[:used])
            del self.buf[used:]
            if state == HEAD:
                pieces += self._head_bytes(data[i : i + taken])
            else:
                pieces.append((data[i : i + taken], True))
            i += taken
            if len(self.buf) > MAX_HEAD:
                raise GuardViolation("framing", "response head or trailers too large")
            if end != -1:
                self.buf.clear()
                if state == HEAD:
                    self.status_ok = False
                    self._head(block)
                else:
                    self.state = HEAD
        return pieces

    def _head_bytes(self, raw: bytes) -> list[Piece]:
        """Head bytes go out once the status line is known to be one."""
        if self.status_ok:
            return [(raw, True)]
        line_end = self.buf.find(b"\r\n")
        first = bytes(self.buf if line_end == -1 else self.buf[:line_end])
        if line_end == -1:
            if len(first) > MAX_LINE or not (
                b"HTTP/1.1 ".startswith(first[:9]) or b"HTTP/1.0 ".startswith(first[:9])
            ):
                raise GuardViolation("framing", "bytes where a response head must start")
            return []  # kept in buf until the line is complete
        if not _STATUS.fullmatch(first):
            raise GuardViolation("framing", "not an HTTP/1.1 status line")
        self.status_ok = True
        return [(bytes(self.buf), True)]

    def _head(self, block: bytes) -> None:
        lines = block[:-4].split(b"\r\n")
        match = _STATUS.fullmatch(lines[0])
        assert match is not None  # checked by _head_bytes
        status = int(match.group(1))
        fields: dict[bytes, list[bytes]] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not _TOKEN.fullmatch(name):
                raise GuardViolation("framing", "malformed header field")
            fields.setdefault(name.lower(), []).append(value.strip(b" \t"))
        if 100 <= status < 200 and status != 101:
            self.state = HEAD  # interim: the final answer follows
            return
        method = self.guard.next_method()
        if status == 101:
            if fields.get(b"sec-websocket-extensions"):
                raise GuardViolation("websocket_extension", "WebSocket extensions hide frames")
            self.state = OPAQUE
            return
        if method == "HEAD" or status in (204, 304):
            self.state = HEAD  # no body, whatever the fields say
            return
        if method == "CONNECT" and 200 <= status < 300:
            self.state = OPAQUE
            return
        codings = parse_codings(b", ".join(fields.get(b"content-encoding", [])).decode("latin-1"))
        te = [
            t.strip().lower()
            for v in fields.get(b"transfer-encoding", [])
            for t in v.split(b",")
            if t.strip()
        ]
        lengths = set(fields.get(b"content-length", []))
        if te:
            if te != [b"chunked"]:
                raise GuardViolation("transfer_coding", "a transfer coding other than chunked")
            if lengths:
                raise GuardViolation("framing", "both Content-Length and Transfer-Encoding")
            self.state = CHUNK_SIZE
        elif lengths:
            value = lengths.pop()
            if lengths or not value.isdigit():
                raise GuardViolation("framing", "invalid Content-Length")
            self.left = int(value)
            self.state = BODY if self.left else HEAD
        else:
            self.state = UNTIL_CLOSE
        if codings and self.state != HEAD:
            raise GuardViolation("content_coding", "a content coding other than identity")

    def _chunk_size(self, line: bytes) -> None:
        self.guard.check_line(line)
        match = _CHUNK_SIZE.fullmatch(line.rstrip(b"\r\n"))
        if match is None or not line.endswith(b"\r\n"):
            raise GuardViolation("framing", "malformed chunk size line")
        self.left = int(match.group(1), 16)
        self.state = CHUNK_DATA if self.left else TRAILERS


class LivePairs(Mapping[bytes, bytes]):
    """A scrub map read through ``get`` at each use (the owner may swap the dict)."""

    def __init__(self, get: Callable[[], Mapping[bytes, bytes]]) -> None:
        self._get = get

    def __getitem__(self, key: bytes) -> bytes:
        return self._get()[key]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


class ResponseGuard:
    """Checks one intercepted tunnel's server-to-sandbox plaintext stream.

    ``pairs`` is the connection's live scrub map (real form -> shown form);
    only its keys are used. Call :meth:`request` for each request head the
    sandbox sent (in order), :meth:`send` with each write towards the sandbox.
    """

    def __init__(self, pairs: Mapping[bytes, bytes]) -> None:
        self.pairs = pairs
        self.methods: collections.deque[str] = collections.deque()
        self.violation: GuardViolation | None = None
        self._framing = _Framing(self)
        self._forms = Forms({})
        self._keep = 0
        self._alphabet = b""
        self._window = b""  # the last content bytes let through
        self._held: list[Piece] = []

    # -- what the caller tells us --------------------------------------------
    def request(self, method: str) -> None:
        self.methods.append(method.upper())

    def next_method(self) -> str:
        return self.methods.popleft() if self.methods else "GET"

    # -- the check ----------------------------------------------------------
    def _refresh(self) -> Forms:
        if self._forms.stale(self.pairs):
            self._forms = forms = Forms(self.pairs)
            longest = max((len(k) for k, _ in forms.minimal), default=0)
            self._keep = longest + wrap_room(longest) if longest else 0
            # Bytes a form (or a line break inside one) is made of.
            self._alphabet = bytes(set(b"".join(k for k, _ in forms.minimal) + b"\r\n"))
        return self._forms

    def check_line(self, line: bytes) -> None:
        """A framing line (a chunk size with its extensions) on its own."""
        if self._refresh().present(line):
            raise GuardViolation("token", "a real token in a chunk size line")

    def send(self, data: bytes) -> bytes:
        """The bytes of ``data`` (and of earlier held writes) that may go out now.

        Raises :class:`GuardViolation`; every later call raises it again.
        """
        if self.violation is not None:
            raise self.violation
        try:
            return self._send(data)
        except GuardViolation as exc:
            self.violation = exc
            self._held = []
            raise

    def _send(self, data: bytes) -> bytes:
        forms = self._refresh()
        had_held = bool(self._held)
        pieces = self._held + self._framing.feed(data)
        self._held = []
        # Usually what goes out is exactly ``data``: no copy then.
        whole = not had_held and sum(len(raw) for raw, _ in pieces) == len(data)
        if not forms.minimal:
            self._window = b""
            return data if whole else b"".join(raw for raw, _ in pieces)
        keep, window = self._keep, self._window
        matched = [raw for raw, is_content in pieces if is_content]
        if len(matched) == 1 and whole:
            # One stretch of content (a body chunk with its framing): search the
            # write itself, a superset of the content, rather than copy it out.
            content: bytes | memoryview = matched[0]
            searched = data
        else:
            content = searched = b"".join(matched)
        # A form lies in what is searched, or starts in the window and ends
        # early in the content (one search over both when the write is small).
        if len(content) <= 16 * 1024:
            found = forms.present(window + content)
        else:
            found = forms.present(searched) or bool(
                window and forms.present(window + content[: keep - 1])
            )
        if found:
            raise GuardViolation("token", "a real token on its way to the sandbox")
        tail = bytes(content[-keep:]) if len(content) >= keep else (window + content)[-keep:]
        # A held prefix is HOLD_MIN bytes of forms or more: a byte of anything
        # else among the last HOLD_MIN rules it out without a search.
        if tail[-HOLD_MIN:].translate(None, self._alphabet) or len(tail) < HOLD_MIN:
            hold = 0
        else:
            hold = partial_form_at_end(tail, forms.minimal)
        hold = min(hold, len(content)) if hold >= HOLD_MIN else 0
        if hold and self._framing.at_boundary:
            raise GuardViolation("token", "a message ends on the start of a real token")
        if not hold:
            out = data if whole else b"".join(raw for raw, _ in pieces)
            self._window = tail
            return out
        out, sent = self._split(pieces, len(content) - hold)
        self._window = sent[-keep:] if len(sent) >= keep else (window + sent)[-keep:]
        return out

    def _split(self, pieces: list[Piece], upto: int) -> tuple[bytes, bytes]:
        """Send pieces up to ``upto`` content bytes; hold the rest, in order."""
        out: list[bytes | memoryview] = []
        sent: list[bytes | memoryview] = []
        seen = 0
        for index, (raw, matched) in enumerate(pieces):
            if matched and seen + len(raw) > upto:
                cut = upto - seen
                out.append(raw[:cut])
                sent.append(raw[:cut])
                self._held = [(raw[cut:], True), *pieces[index + 1 :]]
                break
            out.append(raw)
            if matched:
                sent.append(raw)
                seen += len(raw)
        return b"".join(out), b"".join(sent)
