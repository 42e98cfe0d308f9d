"""ripgrep: argv for a query, and parsers for its output.

Content mode parses ``--json`` events (begin/context/match/end), so paths and
lines with any bytes arrive intact. ``files_with_matches`` and ``count`` use
``--files-with-matches``/``--count`` with ``--null`` instead: rg has no JSON
form of them, and NUL-terminated paths are just as unambiguous while rg stops
at the first hit per file and prints a few bytes per file instead of every
matching line (which would hit the 256 KiB cap long before the tree is done).
"""

from __future__ import annotations

import asyncio
import base64
import json
import mmap
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidRequest, Timeout
from ..identity import ExecUser
from .leases import exclude_glob
from .limits import LINE_CAP, LINE_CUT_MARKER, cut_line
from .query import Query
from .rows import EngineResult, FileBlock, Hit, clean_path
from .runner import is_io_error, run_engine, timeout_message
from .stall import blocking_ignore_files, stall_message

# A line longer than the output cap is located by mapping its file; never scan past this.
_LOCATE_SCAN_CAP = 512 * 1024 * 1024
# The parallel phase gives up (for a sorted rerun that stops one row past the page)
# once it has this many rows: past it, a page is cheaper to get in path order than by
# reading on to the end, and `total` is no longer worth the wait.
_PARALLEL_ROWS = 1000


def rg_argv(binary: str, query: Query, target: str, *, sort: bool) -> list[str]:
    argv = [binary, "--no-config", "--hidden", "--no-require-git"]
    if query.include_ignored:
        argv.append("--no-ignore")
    argv.append("--ignore-case" if query.case_insensitive else "--case-sensitive")
    if query.fixed:
        argv.append("--fixed-strings")
    if query.glob:
        argv += ["--glob", query.glob]
    # Last, so no user glob can bring .git back (or a leased file, which would block rg).
    argv += ["--glob", "!.git"]
    for path in query.exclude:
        argv += ["--glob", exclude_glob(path)]
    if query.type:
        argv += ["--type", query.type]
    if query.mode == "files_with_matches":
        argv += ["--files-with-matches", "--null"]
    elif query.mode == "count":
        argv += ["--count", "--with-filename", "--null"]
    else:
        argv.append("--json")
        if query.context:
            argv += ["--context", str(query.context)]
    if sort:
        argv += ["--sort", "path"]
    argv += ["-e", query.pattern, "--", target]
    return argv


class _PathRowParser:
    """One row per complete output record, until ``want`` rows; an incomplete tail
    (after a stop, or the last bytes of a cut output) is dropped by ``finish``."""

    def __init__(self, want: int | None) -> None:
        self.want = want
        self.rows: list[Hit] = []
        self._buf = b""

    def feed(self, data: bytes) -> bool:
        self._buf = self._take(self._buf + data)
        return self.want is not None and len(self.rows) >= self.want

    def _take(self, buf: bytes) -> bytes:
        """Appends the rows of the complete records in ``buf``; returns what is left."""
        raise NotImplementedError

    def finish(self) -> None:
        """The incomplete tail is dropped."""


class RgFilesParser(_PathRowParser):
    """``--files-with-matches --null``: NUL-terminated paths."""

    def _take(self, buf: bytes) -> bytes:
        *done, rest = buf.split(b"\0")
        for raw in done:
            self.rows.append(Hit(clean_path(raw.decode("utf-8", errors="surrogateescape"))))
        return rest


_COUNT_LINE = re.compile(rb"([^\0]*)\0(\d+)\r?\n")


class CountParser(_PathRowParser):
    """``PATH NUL COUNT NEWLINE`` lines (rg ``--count --null`` and GNU grep ``-c --null``)."""

    def _take(self, buf: bytes) -> bytes:
        end = 0
        for m in _COUNT_LINE.finditer(buf):
            if m.start() != end:
                break
            end = m.end()
            count = int(m.group(2))
            if count:
                path = clean_path(m.group(1).decode("utf-8", errors="surrogateescape"))
                self.rows.append(Hit(path, count=count))
        return buf[end:]


@dataclass(frozen=True)
class Salvage:
    """A match line cut off by the output cap: its file, its first bytes, and the
    last line number seen in that file (the match lies after it)."""

    path: str
    prefix: str
    after_line: int


def _path_text(obj: dict[str, Any] | None) -> str:
    """A path as Python's os functions spell it (non-UTF-8 bytes as surrogate escapes),
    so rows can be opened again (search.verify); responses show it printable."""
    if obj and "bytes" in obj and "text" not in obj:
        return base64.b64decode(obj["bytes"]).decode("utf-8", errors="surrogateescape")
    return _text(obj)


def _text(obj: dict[str, Any] | None) -> str:
    if not obj:
        return ""
    if "text" in obj:
        return str(obj["text"])
    return base64.b64decode(obj.get("bytes", "")).decode("utf-8", errors="replace")


_PARTIAL_PATH = re.compile(rb'"path":\{"text":"((?:[^"\\]|\\.)*)"\}')
_PARTIAL_TEXT = b'"lines":{"text":"'


def _json_string_prefix(raw: bytes) -> str | None:
    """Decode the longest decodable prefix of a JSON string body that was cut off."""
    text = raw.decode("utf-8", errors="ignore")
    for trim in range(0, 7):
        try:
            value = json.loads('"' + (text[: len(text) - trim] if trim else text) + '"')
        except ValueError:
            continue
        return str(value)
    return None


class RgJsonParser:
    """``--json`` events for content mode; rows are complete when their file ends."""

    def __init__(self, want: int | None, context: int) -> None:
        self.want = want
        self.context = context
        self.rows: list[Hit] = []
        self._buf = b""
        self._block: FileBlock | None = None
        self._seen = 0
        self._last_line: dict[str, int] = {}

    def feed(self, data: bytes) -> bool:
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        return any(raw and self._event(raw) for raw in lines)

    def _event(self, raw: bytes) -> bool:
        try:
            event = json.loads(raw)
        except ValueError:
            return False
        kind = event.get("type")
        data = event.get("data") or {}
        if kind == "begin":
            self._flush()
            self._block = FileBlock(clean_path(_path_text(data.get("path"))), self.context)
        elif kind in ("match", "context"):
            path = clean_path(_path_text(data.get("path")))
            if self._block is None or self._block.path != path:
                self._flush()
                self._block = FileBlock(path, self.context)
            line = int(data.get("line_number") or 0)
            self._last_line[path] = line
            if kind == "match":
                self._block.add_match(line, _text(data.get("lines")))
                self._seen += 1
                if self.want is not None and self._seen >= self.want:
                    return True
            else:
                self._block.add_context(line, _text(data.get("lines")))
        elif kind == "end":
            self._flush()
        return False

    def _flush(self) -> None:
        if self._block is not None:
            self.rows.extend(self._block.rows())
            self._block = None

    def finish(self) -> Salvage | None:
        """Flush the open file; describe a match event the cap cut in half, if any."""
        self._flush()
        tail = self._buf
        self._buf = b""
        if not tail.startswith(b'{"type":"match"'):
            return None
        path_match = _PARTIAL_PATH.search(tail)
        start = tail.find(_PARTIAL_TEXT)
        if path_match is None or start < 0:
            return None
        path = _json_string_prefix(path_match.group(1))
        prefix = _json_string_prefix(tail[start + len(_PARTIAL_TEXT) :])
        if not path or not prefix:
            return None
        path = clean_path(path)
        return Salvage(path, prefix, self._last_line.get(path, 0))


def locate_line(path: Path, prefix: str, after_line: int) -> int | None:
    """The number of the first line after ``after_line`` that starts with ``prefix``.

    Used only for a match line longer than the output cap: rg's JSON event
    carries the line number after the line's text, so the cap cuts it off.
    The file is mapped, not read, and the scan is bounded.
    """
    needle = prefix.encode("utf-8", errors="surrogateescape")
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                return None
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                end = min(size, _LOCATE_SCAN_CAP)
                pos, line = 0, 1
                while line <= after_line:
                    newline = mm.find(b"\n", pos, end)
                    if newline < 0:
                        return None
                    pos, line = newline + 1, line + 1
                found = mm.find(needle, pos, end)
                while found >= 0 and found > 0 and mm[found - 1] != 0x0A:
                    found = mm.find(needle, found + 1, end)
                if found < 0:
                    return None
                return line + mm[pos:found].count(b"\n")
    except (OSError, ValueError):
        return None


def _parser(query: Query, want: int | None) -> RgFilesParser | CountParser | RgJsonParser:
    if query.mode == "files_with_matches":
        return RgFilesParser(want)
    if query.mode == "count":
        return CountParser(want)
    return RgJsonParser(want, query.context)


async def search_rg(
    binary: str,
    query: Query,
    root: Path,
    rel: str,
    *,
    is_dir: bool,
    want: int,
    deadline: float,
    timeout_s: float,
    sorted_only: bool = False,
    user: ExecUser | None = None,
) -> EngineResult:
    """Parallel search first, sorted here; if its output passes the cap, a sorted rerun.

    A parallel rg emits files in a random order, so a deterministic page needs
    every row; when they all fit under the cap (the rare-pattern case) that is
    the fastest way. When they do not (a common pattern: the cap, or more than
    ``_PARALLEL_ROWS`` rows), ``--sort path`` makes rg's order deterministic so
    reading can stop one row past the page.
    ``sorted_only`` skips the parallel phase (the benchmark compares both).
    """
    phases = (False, True) if is_dir and not sorted_only else (True,)
    for sort in phases:
        parser = _parser(query, want if sort else max(want, _PARALLEL_ROWS))
        outcome = await run_engine(
            rg_argv(binary, query, rel or ".", sort=sort),
            cwd=root,
            parser=parser,
            deadline=deadline,
            user=user,
        )
        if outcome.timed_out:
            raise Timeout(timeout_message(timeout_s))
        if outcome.pipe_stall:
            culprits = await asyncio.to_thread(blocking_ignore_files, root, rel)
            raise InvalidRequest(
                stall_message(rel or ".", culprits), {"path": rel or ".", "found": culprits}
            )
        salvage = parser.finish()
        if not sort and (outcome.capped or outcome.stopped):
            continue
        rows = parser.rows
        if outcome.capped and salvage is not None and len(salvage.prefix.encode()) >= LINE_CAP:
            line = await asyncio.to_thread(
                locate_line, root / salvage.path, salvage.prefix, salvage.after_line
            )
            if line is not None:
                text = cut_line(salvage.prefix)
                if not text.endswith(LINE_CUT_MARKER):
                    text += LINE_CUT_MARKER
                rows.append(Hit(salvage.path, line, text))
        failed = (
            outcome.exit_code == 2
            and not rows
            and bool(outcome.stderr.strip())
            and not is_io_error(outcome.stderr)
        )
        code = outcome.exit_code
        killed_by_us = outcome.capped or outcome.stopped
        died = -code if code is not None and code < 0 and not killed_by_us else None
        return EngineResult(
            rows=rows,
            complete=outcome.complete and died is None,
            capped=outcome.capped,
            presorted=sort,
            stderr=outcome.stderr.strip() if outcome.exit_code == 2 else "",
            failed=failed,
            died=died,
        )
    raise AssertionError("unreachable: the sorted phase always returns")
