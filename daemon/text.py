"""The one text codec: strict UTF-8, BOM, line endings, final newline.

Tools match and edit an LF-only string; this module turns file bytes into that
string and back so that a file's own conventions survive an edit:

* a UTF-8 BOM is stripped for matching and restored on write;
* a pure-CRLF file is matched as LF and written back as CRLF;
* in a mixed file, untouched lines keep their exact bytes and new lines take the
  file's first line ending;
* the presence or absence of a final newline is whatever the edited text says.

Lines are split on ``\\n`` only: ``str.splitlines`` would also split on form
feeds and U+2028, which are ordinary characters inside a source line.
"""

from __future__ import annotations

import codecs
import difflib
import os
from dataclasses import dataclass
from typing import Literal

from .errors import BinaryFile, InvalidRequest

BOM = b"\xef\xbb\xbf"
LineEnding = Literal["lf", "crlf", "mixed", "none"]


def split_lines(text: str) -> list[str]:
    """Split on ``\\n`` only; a trailing newline yields no empty last line."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


@dataclass(frozen=True)
class DecodedText:
    """A text file as tools see it, plus what is needed to write it back faithfully."""

    text: str
    bom: bool
    line_ending: LineEnding
    # Exact original line terminators ("\n", "\r\n" or "" for a last line without
    # one), kept only for mixed files, where they must survive untouched lines.
    original_endings: tuple[str, ...] | None = None
    first_ending: str = "\n"

    def encode(self, new_text: str) -> bytes:
        """Bytes for ``new_text`` (LF-only) in this file's conventions."""
        if self.line_ending == "crlf" or (
            self.line_ending == "none" and self.first_ending == "\r\n"
        ):
            body = new_text.replace("\n", "\r\n")
        elif self.line_ending == "mixed" and self.original_endings is not None:
            body = self._encode_mixed(new_text)
        else:
            body = new_text
        data = body.encode("utf-8")
        return BOM + data if self.bom else data

    def _encode_mixed(self, new_text: str) -> str:
        old_segments = self.text.split("\n")
        new_segments = new_text.split("\n")
        endings = self.original_endings or ()
        # For each new segment, the old segment it is an unchanged copy of, if any.
        source: list[int | None] = [None] * len(new_segments)
        matcher = difflib.SequenceMatcher(a=old_segments, b=new_segments, autojunk=False)
        for block in matcher.get_matching_blocks():
            for k in range(block.size):
                source[block.b + k] = block.a + k
        out: list[str] = []
        last = len(new_segments) - 1
        for j, segment in enumerate(new_segments):
            out.append(segment)
            if j == last:
                break
            i = source[j]
            kept = endings[i] if i is not None and i < len(endings) else ""
            out.append(kept or self.first_ending)
        return "".join(out)


def decode(data: bytes, *, path: str = "file") -> DecodedText:
    """Decode file bytes strictly; NUL or invalid UTF-8 means binary."""
    bom = data.startswith(BOM)
    if bom:
        data = data[len(BOM) :]
    if b"\x00" in data:
        raise BinaryFile(
            f"{path} contains NUL bytes, so it is treated as binary and cannot be read or edited "
            "as text; inspect it with exec (e.g. xxd) instead",
            {"path": path},
        )
    try:
        raw = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BinaryFile(
            f"{path} is not valid UTF-8 (byte {exc.start}), so it is treated as binary; "
            "inspect it with exec instead",
            {"path": path},
        ) from exc
    if "\r" not in raw:
        # The common case, answered by two C-level character searches instead of two counts
        # over the whole text: without a "\r" there is no CRLF, so the file is LF or has no
        # line ending at all.
        return DecodedText(text=raw, bom=bom, line_ending="lf" if "\n" in raw else "none")
    crlf = raw.count("\r\n")
    lf = raw.count("\n")
    if lf == 0:
        return DecodedText(text=raw, bom=bom, line_ending="none")
    if crlf == lf:
        return DecodedText(
            text=raw.replace("\r\n", "\n"), bom=bom, line_ending="crlf", first_ending="\r\n"
        )
    if crlf == 0:
        return DecodedText(text=raw, bom=bom, line_ending="lf")
    endings: list[str] = []
    contents: list[str] = []
    for segment in raw.split("\n"):
        if segment.endswith("\r"):
            contents.append(segment[:-1])
            endings.append("\r\n")
        else:
            contents.append(segment)
            endings.append("\n")
    # The final segment (after the last "\n") has no terminator.
    endings[-1] = ""
    first = endings[0] if endings[0] else "\n"
    return DecodedText(
        text="\n".join(contents),
        bom=bom,
        line_ending="mixed",
        original_endings=tuple(endings),
        first_ending=first,
    )


# ---------------------------------------------------------------- streaming pages
#
# ``file_read`` of a large file must not hold the file, its decoded string and
# its line list at once (a 64 MiB file with one emoji decodes to a 256 MiB
# UCS-4 string). ``page_stream`` reads a file descriptor in chunks, decodes
# them incrementally, and keeps only the lines of the page being returned; it
# gives exactly the page ``decode`` + ``page_text`` would give for the same bytes.

STREAM_CHUNK = 1 << 20


def _nul_error(path: str) -> BinaryFile:
    return BinaryFile(
        f"{path} contains NUL bytes, so it is treated as binary and cannot be read or edited "
        "as text; inspect it with exec (e.g. xxd) instead",
        {"path": path},
    )


@dataclass
class StreamPage:
    """One page of a text file, and what ``file_read`` reports about the whole file."""

    content: str
    start_line: int
    end_line: int
    total_lines: int
    next_offset: int | None
    truncated: bool
    line_ending: LineEnding
    bom: bool
    line_truncated: bool = False
    first_line_length: int = 0


class _Pager:
    """The line bookkeeping of :func:`page_stream` (one instance per read)."""

    def __init__(self, offset: int, limit: int, budget: int) -> None:
        self.start = offset - 1
        self.limit = limit
        self.budget = budget
        self.line_no = 0  # index of the line being read
        self.collecting = self.start == 0
        self.done = False
        self.buf: list[str] = []
        self.buf_len = 0  # characters kept of the current line (at most budget)
        self.cur_len = 0  # true length of the current line
        self.lines: list[str] = []
        self.cost = 0
        self.first_cut: str | None = None
        self.first_len = 0
        self.newlines = 0
        self.tail_len = 0  # characters after the last newline so far
        self.ends_cr = False

    def _keep(self, piece: str) -> None:
        self.cur_len += len(piece)
        room = self.budget - self.buf_len
        if room > 0 and piece:
            kept = piece[:room]
            self.buf.append(kept)
            self.buf_len += len(kept)

    def _finish_line(self) -> None:
        line = "".join(self.buf)
        length = self.cur_len
        self.buf, self.buf_len, self.cur_len = [], 0, 0
        if self.line_no == self.start:
            self.first_len = length
            if length >= self.budget:
                self.first_cut = line[: self.budget]
                self.done = True
                return
            self.lines.append(line)
            self.cost = length + 1
        elif self.cost + length + 1 <= self.budget and len(self.lines) < self.limit:
            self.lines.append(line)
            self.cost += length + 1
        else:
            self.done = True
            return
        if len(self.lines) >= self.limit:
            self.done = True

    def feed(self, text: str) -> None:
        """LF-only text (CRLF already folded)."""
        if not text:
            return
        self.newlines += text.count("\n")
        last_nl = text.rfind("\n")
        self.tail_len = len(text) - last_nl - 1 if last_nl >= 0 else self.tail_len + len(text)
        self.ends_cr = text.endswith("\r")
        pos, end = 0, len(text)
        while pos < end:
            if self.done:
                return
            if not self.collecting:
                need = self.start - self.line_no
                found = text.count("\n", pos)
                if found < need:
                    self.line_no += found
                    return
                for _ in range(need):
                    pos = text.index("\n", pos) + 1
                self.line_no += need
                self.collecting = True
                continue
            nl = text.find("\n", pos)
            if nl < 0:
                self._keep(text[pos:])
                return
            self._keep(text[pos:nl])
            self._finish_line()
            self.line_no += 1
            pos = nl + 1

    def finish(self, strip_cr: bool) -> int:
        """End of file: an unterminated last line counts as a line; returns its length.

        ``decode`` drops a final ``\r`` from the unterminated last segment of a
        mixed-ending file; so does this, so both agree on every page.
        """
        tail = self.tail_len
        if strip_cr and self.ends_cr and tail > 0:
            tail -= 1
            if self.collecting and not self.done and self.buf_len == self.cur_len:
                self.buf[-1] = self.buf[-1][:-1]
                self.buf_len -= 1
            self.cur_len -= 1
        if tail > 0 and self.collecting and not self.done:
            self._finish_line()
        return tail


def check_offset(offset: int, total: int, path: str) -> None:
    """Refuses a 1-based line ``offset`` past the last of ``total`` lines (1 is always
    allowed, so an empty file reads as an empty page), saying where to start instead."""
    if offset > 1 and offset > total:
        raise InvalidRequest(
            f"offset {offset} is past the end of {path}, which has {total} lines; "
            "start at 1 or at a line within the file",
            {"path": path, "total_lines": total},
        )


def page_stream(
    fd: int, path: str, offset: int, limit: int, budget: int, *, chunk: int = STREAM_CHUNK
) -> StreamPage:
    """A page of the text file open at ``fd``, read from its start in bounded chunks.

    Raises ``BinaryFile`` (NUL bytes win over invalid UTF-8, as in
    :func:`decode`) and ``InvalidRequest`` for an offset past the end.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    pager = _Pager(offset, limit, budget)
    pos = 0
    consumed = 0  # bytes fed to the decoder, BOM excluded
    bom = False
    bad_at: int | None = None
    carry = ""  # a trailing "\r" held back until we know whether "\n" follows
    crlf = lf = 0
    first = True
    while True:
        raw = os.pread(fd, max(chunk, len(BOM)) if first else chunk, pos)
        final = not raw
        pos += len(raw)
        if first:
            first = False
            if raw.startswith(BOM):
                bom = True
                raw = raw[len(BOM) :]
        if b"\x00" in raw:
            raise _nul_error(path)
        if bad_at is not None:
            if final:
                break
            continue
        try:
            pending = len(decoder.getstate()[0])
            text = decoder.decode(raw, final=final)
        except UnicodeDecodeError as exc:
            bad_at = consumed - pending + exc.start
            if final:
                break
            consumed += len(raw)
            continue
        consumed += len(raw)
        text = carry + text
        carry = ""
        if text.endswith("\r") and not final:
            carry, text = "\r", text[:-1]
        crlf += text.count("\r\n")
        lf += text.count("\n")
        pager.feed(text.replace("\r\n", "\n") if "\r" in text else text)
        if final:
            break
    if bad_at is not None:
        raise BinaryFile(
            f"{path} is not valid UTF-8 (byte {bad_at}), so it is treated as binary; "
            "inspect it with exec instead",
            {"path": path},
        )
    ending: LineEnding = (
        "none" if lf == 0 else "crlf" if crlf == lf else "lf" if crlf == 0 else "mixed"
    )
    tail = pager.finish(strip_cr=ending == "mixed")
    total = pager.newlines + (1 if tail > 0 else 0)
    final_newline = tail == 0 and total > 0
    if total == 0 or offset > total:
        check_offset(offset, total, path)
        return StreamPage("", 1, 0, total, None, False, ending, bom)
    if pager.first_cut is not None:
        nxt = offset + 1 if offset < total else None
        return StreamPage(
            pager.first_cut,
            offset,
            offset,
            total,
            nxt,
            True,
            ending,
            bom,
            line_truncated=True,
            first_line_length=pager.first_len,
        )
    end = pager.start + len(pager.lines)
    content = "\n".join(pager.lines)
    if end < total or final_newline:
        content += "\n"
    nxt = end + 1 if end < total else None
    return StreamPage(content, offset, end, total, nxt, nxt is not None, ending, bom)
