"""``count`` and ``files_with_matches``: counted again on the bytes the resolver opened.

The engine walks the tree and opens files by name, so a directory swapped for
a symlink mid-walk can make it count a file outside the roots under an inside
name. Checking only that the *name* resolves inside a root (what content mode's
line comparison cannot skip, but these modes carry no line to compare) would
still answer with the outside file's count: a one-bit-per-call oracle. So every
file the engine named is opened through the race-free resolver (as the exec
user, never blocking: a FIFO or a file under a lease is refused at once), and
each is counted again on exactly that descriptor: a case-sensitive literal (the
common case: ``fixed_strings``, or a pattern without regex metacharacters) right
here, by counting the lines that hold its bytes; anything else by the engine, run
a second time on those descriptors, passed into the child and named by number
relative to the child's ``/proc/self/fd`` (reopening an ``fd`` entry reaches the
very inode the resolver opened, whatever any name means by then). Only these
counts are answered.

A file the engine named that the resolver will not open is left out, and said
so in a note. The recount reads only files that already matched, so it is
cheap next to the walk (for a regex, one more engine start per 200 files).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import AirlockError, Timeout
from ..identity import ExecUser
from ..paths import Roots
from .engine import SearchEngine
from .grep import GrepParser, grep_argv
from .query import Query
from .rg import CountParser, RgFilesParser, rg_argv
from .rows import Hit
from .runner import run_engine, timeout_message

BATCH = 200
_SELF_FDS = Path("/proc/self/fd")


@dataclasses.dataclass
class Recounted:
    rows: list[Hit]
    # Rows the engine reported whose file the resolver would not open (gone, special, leased).
    skipped: int = 0


_CHUNK = 1 << 20


def literal_needle(query: Query) -> bytes | None:
    """The bytes to count without the engine: a case-sensitive literal on one line.

    Such a pattern matches exactly the lines holding its UTF-8 bytes, in rg and
    grep alike; anything else (a regex, case folding, which is Unicode-wide in rg)
    is left to the engine.
    """
    if not query.fixed or query.case_insensitive or not query.pattern:
        return None
    needle = query.pattern.encode("utf-8", errors="surrogateescape")
    return None if b"\n" in needle or b"\r" in needle else needle


def count_lines_with(fd: int, needle: bytes) -> int | None:
    """How many lines of the open file hold ``needle``; None for a file with a NUL byte
    (binary: the engine's own rules decide), read in 1 MiB chunks."""
    count = 0
    carry = b""
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            break
        if b"\0" in chunk:
            return None
        data = carry + chunk
        cut = data.rfind(b"\n") + 1
        whole, carry = data[:cut], data[cut:]
        pos = whole.find(needle)
        while pos >= 0:
            count += 1
            pos = whole.find(needle, whole.index(b"\n", pos) + 1)
    if needle in carry:
        count += 1
    return count


def open_batch(
    roots: Roots, root: Path, paths: Sequence[str], needle: bytes | None
) -> tuple[dict[str, int], dict[str, int]]:
    """(path -> count done here, path -> an fd the resolver opened, for the engine).

    Every file is opened by the resolver (regular files only, non-blocking). A
    literal is counted right here on that fd; the engine gets the rest. Blocking.
    """
    counted: dict[str, int] = {}
    fds: dict[str, int] = {}
    for path in paths:
        try:
            resolved = roots.resolve(str(root / path) if path else str(root), intent="read")
            fd, _st = roots.open_file(resolved)
        except (AirlockError, OSError):
            continue
        n = None
        if needle is not None:
            try:
                n = count_lines_with(fd, needle)
            except OSError:
                os.close(fd)
                continue
            if n is not None:
                os.close(fd)
                counted[path] = n
                continue
            os.lseek(fd, 0, os.SEEK_SET)
        fds[path] = fd
    return counted, fds


def _close_all(fds: dict[str, int]) -> None:
    for fd in fds.values():
        with contextlib.suppress(OSError):
            os.close(fd)


def _grep_env() -> dict[str, str]:
    """As the first run: no GREP_* from the sandbox's environment, C locale."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GREP_")}
    env["LC_ALL"] = "C"
    return env


def _argv(engine: SearchEngine, query: Query, names: list[str]) -> list[str]:
    if engine.engine == "rg":
        argv = rg_argv(engine.path, query, names[0], sort=False)
        return argv + names[1:]
    return grep_argv(engine, query, names)


def _parser(engine: SearchEngine, query: Query) -> CountParser | RgFilesParser | GrepParser:
    if engine.engine == "grep":
        return GrepParser(query.mode, None, 0, engine.null)
    return RgFilesParser(None) if query.mode == "files_with_matches" else CountParser(None)


async def recount(
    engine: SearchEngine,
    query: Query,
    roots: Roots,
    root: Path,
    rows: Sequence[Hit],
    *,
    user: ExecUser | None,
    deadline: float,
    timeout_s: float,
) -> Recounted:
    """The rows again, each counted on the file the resolver opened (order kept)."""
    again = dataclasses.replace(query, glob=None, type=None, context=0, include_ignored=True)
    paths = list(dict.fromkeys(h.path for h in rows))
    counts: dict[str, int] = {}
    skipped = 0
    needle = literal_needle(query)
    for start in range(0, len(paths), BATCH):
        batch = paths[start : start + BATCH]
        counted, fds = await asyncio.to_thread(open_batch, roots, root, batch, needle)
        skipped += len(batch) - len(fds) - len(counted)
        counts.update({path: n for path, n in counted.items() if n})
        if not fds:
            continue
        try:
            by_name = {str(fd): path for path, fd in fds.items()}
            parser = _parser(engine, again)
            if isinstance(parser, GrepParser):
                parser.set_batch(list(by_name))
            outcome = await run_engine(
                _argv(engine, again, list(by_name)),
                cwd=_SELF_FDS,
                parser=parser,
                deadline=deadline,
                user=user,
                pass_fds=list(fds.values()),
                env=_grep_env() if engine.engine == "grep" else None,
            )
        finally:
            _close_all(fds)
        if outcome.timed_out:
            raise Timeout(timeout_message(timeout_s))
        for hit in parser.rows:
            path = by_name.get(hit.path.removeprefix("./"))
            if path is not None:
                counts[path] = hit.count or 1
    kept: list[Hit] = []
    for hit in rows:
        n = counts.get(hit.path)
        if n is None:
            continue
        kept.append(Hit(hit.path, count=n) if query.mode == "count" else Hit(hit.path))
    return Recounted(kept, skipped)
