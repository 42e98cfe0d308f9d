"""The POSIX grep fallback: same rows, same order, same caps as rg.

grep cannot honour .gitignore, so the daemon walks the tree itself
(``walk`` + ``ignore``, sorted, hidden files included, ``.git`` skipped,
symlinks not followed, ``glob``/``type`` applied as rg would) and hands grep
the files in batches, in path order. Because grep reports files in argument
order, its output is already sorted: the search stops as soon as it has one
row more than asked for, and each batch's process is killed when it does.

``/dev/null`` is appended to every batch so grep always prints file names
(the POSIX idiom for ``-H``). With GNU/BSD grep ``--null`` separates names
unambiguously; without it, lines are attributed by the known file names in
argument order. The regex dialect is PCRE (``-P``) when grep has it (closest
to rg's), else ERE. ``LC_ALL=C`` keeps grep from calling non-UTF-8 files
binary; case-insensitivity is then ASCII-only (documented divergence).
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Timeout
from ..identity import ExecUser
from .engine import SearchEngine
from .ignore import opened, stack_for
from .limits import ENGINE_OUTPUT_CAP, LINE_CAP, LINE_CUT_MARKER
from .query import Query, file_filters
from .rows import EngineResult, FileBlock, Hit, strip_eol
from .runner import is_io_error, run_engine, timeout_message
from .walk import walk

_BATCH_FILES = 1000
_BATCH_BYTES = 96 * 1024
_NUMBERED = re.compile(rb"(\d+)([:-])")


def grep_argv(engine: SearchEngine, query: Query, files: list[str]) -> list[str]:
    argv = [engine.path, "-I"]
    if query.fixed:
        argv.append("-F")
    else:
        argv.append("-P" if engine.pcre else "-E")
    if query.case_insensitive:
        argv.append("-i")
    if engine.null:
        argv.append("--null")
    if query.mode == "files_with_matches":
        argv.append("-l")
    elif query.mode == "count":
        argv.append("-c")
    else:
        argv.append("-n")
        if query.context:
            argv += ["-C", str(query.context)]
    # "./" keeps a file named "-x" from being read as an option even where "--" is not honoured.
    argv += ["-e", query.pattern, "--", *(f"./{f}" for f in files), "/dev/null"]
    return argv


@dataclass
class GrepParser:
    """Parses grep's output for one mode across batches (``set_batch`` before each)."""

    mode: str
    want: int | None
    context: int
    null: bool
    rows: list[Hit] = field(default_factory=list)
    _files: list[bytes] = field(default_factory=list)
    _index: int = 0
    _buf: bytes = b""
    _block: FileBlock | None = None
    _seen: int = 0

    def set_batch(self, files: list[str]) -> None:
        self._files = [os.fsencode(f"./{f}") for f in files]
        self._index = 0
        self._buf = b""

    def feed(self, data: bytes) -> bool:
        self._buf += data
        if self.null and self.mode == "files_with_matches":
            *done, self._buf = self._buf.split(b"\0")
        else:
            *done, self._buf = self._buf.split(b"\n")
        return any(self._line(raw) for raw in done)

    def _enough(self) -> bool:
        return self.want is not None and self._seen >= self.want

    def _split(self, raw: bytes) -> tuple[bytes, bytes] | None:
        """(path, rest after the separator) for one output line."""
        if self.mode == "files_with_matches":
            return raw, b""
        if self.null:
            cut = raw.find(b"\0")
            return (raw[:cut], raw[cut + 1 :]) if cut >= 0 else None
        while self._index < len(self._files):
            name = self._files[self._index]
            if raw.startswith(name) and len(raw) > len(name):
                sep = raw[len(name) : len(name) + 1]
                rest = raw[len(name) + 1 :]
                if self.mode == "count" and sep == b":" and rest.isdigit():
                    return name, rest
                numbered = _NUMBERED.match(rest)
                if self.mode == "content" and numbered and numbered.group(2) == sep:
                    return name, rest
            self._index += 1
        return None

    def _line(self, raw: bytes) -> bool:
        if raw in (b"--", b""):
            return False
        split = self._split(raw)
        if split is None:
            return False
        name, rest = split
        path = _path(name)
        if path is None:
            return False
        if self.mode == "files_with_matches":
            self.rows.append(Hit(path))
            self._seen += 1
        elif self.mode == "count":
            count = int(rest.strip() or b"0")
            if count:
                self.rows.append(Hit(path, count=count))
                self._seen += 1
        else:
            numbered = _NUMBERED.match(rest)
            if numbered is None:
                return False
            line = int(numbered.group(1))
            text = rest[numbered.end() :].decode("utf-8", errors="replace")
            if self._block is None or self._block.path != path:
                self._flush()
                self._block = FileBlock(path, self.context)
            if numbered.group(2) == b":":
                self._block.add_match(line, text)
                self._seen += 1
            else:
                self._block.add_context(line, text)
        return self._enough()

    def _flush(self) -> None:
        if self._block is not None:
            self.rows.extend(self._block.rows())
            self._block = None

    def finish(self, capped: bool) -> None:
        """Flush the open file; a match line the cap cut in half is kept, cut, with the marker."""
        tail, self._buf = self._buf, b""
        if capped and tail and self.mode == "content" and not self._enough():
            split = self._split(tail)
            numbered = _NUMBERED.match(split[1]) if split else None
            path = _path(split[0]) if split else None
            if split and numbered and numbered.group(2) == b":" and path is not None:
                text = split[1][numbered.end() : numbered.end() + LINE_CAP]
                if self._block is None or self._block.path != path:
                    self._flush()
                    self._block = FileBlock(path, self.context)
                self._block.matches.append(
                    (
                        int(numbered.group(1)),
                        strip_eol(text.decode("utf-8", errors="ignore")) + LINE_CUT_MARKER,
                    )
                )
        self._flush()


def _path(name: bytes) -> str | None:
    if name == b"/dev/null":
        return None
    text = name.decode("utf-8", errors="surrogateescape")
    return text[2:] if text.startswith("./") else text


def list_files(root: Path, rel: str, query: Query, root_fd: int | None = None) -> list[str]:
    """The files grep should read, in path order (blocking: run in a thread).

    Walked from ``root_fd`` (the resolver's open root) without following links;
    only regular files are listed, so grep never opens a FIFO or a device.
    """
    try:
        with opened(root, root_fd, rel):
            pass
    except OSError:
        return [rel] if rel else []
    keep_file, prune_dir = file_filters(query)
    ignore = None if query.include_ignored else stack_for(root, rel, root_fd)
    excluded = set(query.exclude)
    return [
        entry.rel
        for entry in walk(
            root,
            rel,
            max_depth=None,
            include_hidden=True,
            ignore=ignore,
            keep_file=keep_file,
            prune_dir=prune_dir,
            root_fd=root_fd,
        )
        if entry.kind == "file" and entry.rel not in excluded
    ]


def _batches(files: list[str]) -> list[list[str]]:
    batches: list[list[str]] = []
    current: list[str] = []
    size = 0
    for f in files:
        if current and (len(current) >= _BATCH_FILES or size + len(f) + 3 > _BATCH_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append(f)
        size += len(f) + 3
    if current:
        batches.append(current)
    return batches


async def search_grep(
    engine: SearchEngine,
    query: Query,
    root: Path,
    rel: str,
    *,
    deadline: float,
    timeout_s: float,
    root_fd: int | None = None,
    user: ExecUser | None = None,
) -> EngineResult:
    loop = asyncio.get_running_loop()
    try:
        files = await asyncio.wait_for(
            asyncio.to_thread(list_files, root, rel, query, root_fd),
            max(deadline - loop.time(), 0.1),
        )
    except TimeoutError:
        raise Timeout(timeout_message(timeout_s)) from None
    # Read to the end or the cap, not just one row past the page: grep walks in path
    # order, so what it returns is deterministic either way, and reading on makes `total`
    # known whenever rg (whose first phase reads everything under the cap) knows it.
    parser = GrepParser(query.mode, None, query.context, engine.null)
    # GREP_OPTIONS/GREP_COLOR(S) from the sandbox's environment must not change the output.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GREP_")}
    env["LC_ALL"] = "C"
    read = 0
    capped = stopped = failed = incomplete = False
    errors: list[str] = []
    for batch in _batches(files):
        parser.set_batch(batch)
        outcome = await run_engine(
            grep_argv(engine, query, batch),
            cwd=Path(f"/proc/self/fd/{root_fd}") if root_fd is not None else root,
            parser=parser,
            deadline=deadline,
            cap=ENGINE_OUTPUT_CAP - read,
            env=env,
            user=user,
        )
        read += outcome.bytes_read
        if outcome.timed_out:
            raise Timeout(timeout_message(timeout_s))
        if outcome.pipe_stall:
            # A listed file swapped for a FIFO since the walk: that batch is partial.
            errors.append("grep was stopped waiting on a FIFO")
            incomplete = True
        if outcome.exit_code == 2 and outcome.stderr.strip():
            errors.append(outcome.stderr.strip())
            if not is_io_error(outcome.stderr):
                failed = True
                break
        if outcome.capped or outcome.stopped:
            capped, stopped = outcome.capped, outcome.stopped
            break
    parser.finish(capped)
    return EngineResult(
        rows=parser.rows,
        complete=not (capped or stopped or failed or incomplete),
        capped=capped,
        presorted=True,
        stderr="\n".join(errors),
        failed=failed,
    )
