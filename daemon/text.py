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

import difflib
from dataclasses import dataclass
from typing import Literal

from airlock.daemon.errors import BinaryFile

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


def is_binary(data: bytes) -> bool:
    if b"\x00" in data:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


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


def decode_new(text: str) -> DecodedText:
    """Conventions for a file that does not exist yet: LF, no BOM."""
    return DecodedText(text="", bom=False, line_ending="lf")
