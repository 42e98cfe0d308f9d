"""Strict parser for the Codex ``apply_patch`` format.

The format is what models are trained to emit, so the parser accepts exactly
the slack Codex accepts (whitespace around markers and headers, a heredoc
wrapper, ``*** Environment ID:`` lines before Begin, CRLF) and nothing more:
a patch it cannot read unambiguously is refused with a message saying which
line is wrong and what it should look like, before any file is touched.

The output is a list of operations; paths are only checked syntactically
here (relative, ``/``-separated, no empty/``.``/``..`` segment). Resolving
them against the filesystem is the planner's job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from ..errors import PatchParseError

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File:"
DELETE = "*** Delete File:"
UPDATE = "*** Update File:"
MOVE = "*** Move to:"
EOF_MARKER = "*** End of File"
ENVIRONMENT = "*** Environment ID:"

MAX_OPERATIONS = 100
MAX_PATCH_CHARS = 500_000

# The shell forms Codex-trained models send (and nothing else shell-like):
#   <<'EOF'                       a bare heredoc wrapper
#   apply_patch <<'EOF'           (or applypatch; any tag, quoted or not)
#   cd DIR && apply_patch <<'EOF' (DIR single-quoted, double-quoted or bare)
_TAG = r"""(?P<q>['"]?)(?P<tag>[A-Za-z_][A-Za-z0-9_.-]*)(?P=q)"""
_DIR = r"""(?P<dir>'[^']*'|"(?:[^"\\]|\\.)*"|[^\s'"\\&;|<>()$`*?\[\]{}!#~][^\s'"\\&;|<>()$`*?\[\]{}!#]*)"""
_HEREDOC_OPEN = re.compile(
    rf"^(?:(?:cd\s+{_DIR}\s*&&\s*)?(?P<cmd>apply_patch|applypatch)\s*)?<<-?\s*{_TAG}\s*$"
)
_SHELL_HINT = re.compile(r"(apply_?patch|<<|^\s*cd\s|&&|\|\||;|\$\(|`)")
SHELL_FORMS = (
    "a bare patch ('*** Begin Patch' ... '*** End Patch'), or the shell forms "
    "\"apply_patch <<'EOF'\" / \"applypatch <<'EOF'\" (any tag, quoted or not), optionally "
    'preceded by "cd DIR && ", with the closing tag alone on the last line'
)
_RANGE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")

Tag = Literal[" ", "-", "+"]
_BLANK: tuple[Tag, str] = (" ", "")  # an empty patch line inside a chunk: blank context


@dataclass(frozen=True)
class Chunk:
    """One ``@@`` block of an Update: where to look, and the tagged lines.

    ``lines`` keeps context, removed and added lines interleaved (tag, text) so
    the planner can keep the file's own bytes for context lines. ``old`` and
    ``new`` are the derived before/after sequences.
    """

    hints: tuple[str, ...]
    range_start: int | None  # 1-based old start of a unified range header
    range_count: int | None
    lines: tuple[tuple[Tag, str], ...]
    end_of_file: bool
    line_number: int  # 1-based line in the patch where the chunk starts

    @property
    def old(self) -> list[str]:
        return [text for tag, text in self.lines if tag != "+"]

    @property
    def new(self) -> list[str]:
        return [text for tag, text in self.lines if tag != "-"]


@dataclass(frozen=True)
class AddFile:
    path: str
    lines: tuple[str, ...]
    line_number: int


@dataclass(frozen=True)
class DeleteFile:
    path: str
    line_number: int


@dataclass(frozen=True)
class UpdateFile:
    path: str
    move_to: str | None
    chunks: tuple[Chunk, ...]
    line_number: int


Operation = AddFile | DeleteFile | UpdateFile


@dataclass
class _Cursor:
    lines: list[str]
    offset: int  # patch line number (1-based) of lines[0]
    pos: int = 0
    ops: list[Operation] = field(default_factory=list)

    def at_end(self) -> bool:
        return self.pos >= len(self.lines)

    @property
    def line(self) -> str:
        return self.lines[self.pos]

    @property
    def number(self) -> int:
        return self.offset + self.pos


def _fail(message: str, line: int | None = None, **details: object) -> PatchParseError:
    where = f"line {line}: " if line is not None else ""
    return PatchParseError(
        f"{where}{message} Fix the patch and send it again; nothing was written.",
        {**({"line": line} if line is not None else {}), **details},
    )


def check_path(raw: str, line: int) -> str:
    """Syntax of a patch path: relative, ``/``-separated, no empty/``.``/``..`` segment."""
    path = raw.strip()
    if not path:
        raise _fail("the file path is missing after the marker.", line)
    if path.startswith("/") or path.startswith("~") or re.match(r"^[A-Za-z]:[\\/]", path):
        raise _fail(
            f"{path!r} is absolute; patch paths are relative to the patch root.", line, path=path
        )
    if "\\" in path:
        raise _fail(f"{path!r} uses backslashes; separate path segments with '/'.", line, path=path)
    if "\x00" in path:
        raise _fail("the path contains a NUL byte.", line, path=path)
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            raise _fail(
                f"{path!r} has an empty, '.' or '..' segment; write the plain relative path "
                "(e.g. src/app.py).",
                line,
                path=path,
            )
    return path


def _split(patch: str) -> list[str]:
    # Split on "\n" only (never str.splitlines: form feeds and U+2028 are text),
    # and drop one "\r" so a CRLF patch reads like an LF one.
    if "\r" not in patch:
        return patch.split("\n")
    return [line[:-1] if line.endswith("\r") else line for line in patch.split("\n")]


def _unquote_dir(raw: str, line: int) -> str:
    """The directory of a ``cd DIR &&`` prefix, unquoted like a POSIX shell would."""
    if raw.startswith("'"):
        value = raw[1:-1]
    elif raw.startswith('"'):
        inner = raw[1:-1]
        if re.search(r"(?<!\\)[$`]", inner):
            raise _fail(
                f"the cd directory {raw} uses shell expansion ($ or `); write the directory "
                "literally.",
                line,
            )
        value = re.sub(r'\\([$`"\\])', r"\1", inner)
    else:
        value = raw
    if not value or "\x00" in value:
        raise _fail("the cd directory is empty; name the directory or drop 'cd DIR &&'.", line)
    return value


def _body(patch: str) -> tuple[list[str], int, str | None]:
    """The lines between Begin and End, the patch line number of the first, and a cd DIR."""
    lines = _split(patch)
    first = 0
    last = len(lines) - 1
    while first <= last and not lines[first].strip():
        first += 1
    while last >= first and not lines[last].strip():
        last -= 1
    if first > last:
        raise _fail("the patch is empty; it must start with '*** Begin Patch'.")
    # A heredoc wrapper: <<'EOF' ... EOF (as a model writes it for a shell).
    opener = _HEREDOC_OPEN.match(lines[first].strip())
    cd: str | None = None
    if opener is not None:
        if opener.group("dir") is not None:
            cd = _unquote_dir(opener.group("dir"), first + 1)
        if lines[last].strip() != opener.group("tag"):
            raise _fail(
                f"the heredoc opened with {lines[first].strip()!r} is not closed by "
                f"{opener.group('tag')!r} alone on the last line; accepted: {SHELL_FORMS}.",
                first + 1,
            )
        first += 1
        last -= 1
        while first <= last and not lines[first].strip():
            first += 1
        while last >= first and not lines[last].strip():
            last -= 1
    begin = first
    while begin <= last and lines[begin].strip() != BEGIN:
        if lines[begin].strip() and not lines[begin].strip().startswith(ENVIRONMENT):
            if _SHELL_HINT.search(lines[begin]):
                raise _fail(
                    f"{lines[begin].strip()!r} is shell syntax airlock does not run; send "
                    f"{SHELL_FORMS}.",
                    begin + 1,
                )
            raise _fail(
                f"the patch must start with '{BEGIN}' (only blank lines and "
                f"'{ENVIRONMENT}' lines may come before it), got {lines[begin]!r}.",
                begin + 1,
            )
        begin += 1
    if begin > last:
        raise _fail(f"'{BEGIN}' is missing; the first line of the patch must be '{BEGIN}'.")
    if lines[last].strip() != END:
        if any(lines[i].strip() == END for i in range(begin + 1, last)):
            raise _fail(
                f"there is content after '{END}' (up to line {last + 1}); only blank lines "
                "may follow it. Put every operation before the end marker.",
                last + 1,
            )
        raise _fail(f"'{END}' is missing; the last line of the patch must be '{END}'.", last + 1)
    # One C-level search first: a patch's body almost never mentions the end marker.
    inner = range(begin + 1, last) if END in "\n".join(lines[begin + 1 : last]) else range(0)
    for i in inner:
        if lines[i].rstrip() == END:
            raise _fail(
                f"there is content after '{END}'; only blank lines may follow it. Put every "
                "operation before the end marker.",
                i + 1,
            )
    end = last
    return lines[begin + 1 : end], begin + 2, cd


def parse_patch(patch: str) -> list[Operation]:
    """Parse ``patch`` into operations or raise :class:`PatchParseError`."""
    return parse_invocation(patch)[0]


def parse_invocation(patch: str) -> tuple[list[Operation], str | None]:
    """Parse ``patch`` into operations and the ``cd DIR`` of its shell form (or None)."""
    if len(patch) > MAX_PATCH_CHARS:
        raise _fail(
            f"the patch is {len(patch)} characters, over the {MAX_PATCH_CHARS} limit; split it "
            "into several smaller patches."
        )
    # A byte-order mark pasted in front of the patch is not part of the format.
    body, offset, cd = _body(patch.removeprefix("\ufeff"))
    cur = _Cursor(body, offset)
    while not cur.at_end():
        line = cur.line
        stripped = line.strip()
        if not stripped:
            cur.pos += 1
            continue
        number = cur.number
        if stripped.startswith(ADD):
            cur.ops.append(_parse_add(cur, check_path(stripped[len(ADD) :], number)))
        elif stripped.startswith(DELETE):
            cur.ops.append(DeleteFile(check_path(stripped[len(DELETE) :], number), number))
            cur.pos += 1
        elif stripped.startswith(UPDATE):
            cur.ops.append(_parse_update(cur, check_path(stripped[len(UPDATE) :], number)))
        elif stripped == END:
            raise _fail(f"there is content after '{END}'; put every operation before it.", number)
        else:
            raise _fail(
                f"{stripped!r} is not a valid operation header. Valid headers: "
                f"'{ADD} path', '{DELETE} path', '{UPDATE} path'.",
                number,
            )
        if len(cur.ops) > MAX_OPERATIONS:
            raise _fail(
                f"the patch has more than {MAX_OPERATIONS} file operations; split it into "
                "several patches."
            )
    if not cur.ops:
        raise _fail(
            "the patch contains no file operations; add at least one "
            f"'{ADD}', '{DELETE}' or '{UPDATE}' section."
        )
    _check_distinct(cur.ops)
    return cur.ops, cd


def _is_header(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(("*** Add File:", "*** Delete File:", "*** Update File:")) or (
        stripped == END
    )


def _parse_add(cur: _Cursor, path: str) -> AddFile:
    number = cur.number
    cur.pos += 1
    content: list[str] = []
    while not cur.at_end():
        line = cur.line
        if line.startswith("+"):
            content.append(line[1:])
            cur.pos += 1
            continue
        if _is_header(line) or line.startswith("***"):
            break
        if not line.strip():
            # A blank line ends the file's content only if an operation follows.
            ahead = cur.pos
            while ahead < len(cur.lines) and not cur.lines[ahead].strip():
                ahead += 1
            if ahead >= len(cur.lines) or _is_header(cur.lines[ahead]):
                break
        raise _fail(
            f"every line of an '{ADD}' section must start with '+' (the file's content); "
            f"got {line!r}. Write an empty line as a lone '+'.",
            cur.number,
            path=path,
        )
    return AddFile(path, tuple(content), number)


def _parse_update(cur: _Cursor, path: str) -> UpdateFile:
    number = cur.number
    cur.pos += 1
    move_to: str | None = None
    if not cur.at_end() and cur.line.strip().startswith(MOVE):
        move_to = check_path(cur.line.strip()[len(MOVE) :], cur.number)
        cur.pos += 1
    chunks: list[Chunk] = []
    body, n = cur.lines, len(cur.lines)
    while cur.pos < n:
        line = body[cur.pos]
        if line.startswith("@@"):  # the usual case: a chunk header
            chunks.append(_parse_chunk(cur, path, first=not chunks))
            continue
        if not line.strip():
            cur.pos += 1
            continue
        if line.startswith("***") or _is_header(line):
            break
        chunks.append(_parse_chunk(cur, path, first=not chunks))
    if not chunks and (move_to is None or move_to == path):
        # A bare '*** Move to:' is a pure rename; anything else must change something.
        raise _fail(
            f"'{UPDATE} {path}' has no changes; add a chunk ('@@' then ' context', '-old', "
            "'+new' lines) or remove the section.",
            number,
            path=path,
        )
    return UpdateFile(path, move_to, tuple(chunks), number)


def _parse_header(line: str) -> tuple[str | None, int | None, int | None]:
    """One ``@@`` line: its hint text, and a unified range header's old start/count."""
    match = _RANGE.match(line.rstrip())
    if match is not None:
        hint = match.group(5).strip()
        count = int(match.group(2)) if match.group(2) is not None else 1
        return (hint or None), int(match.group(1)), count
    hint = line[2:].strip()
    return (hint or None), None, None


def _parse_chunk(cur: _Cursor, path: str, *, first: bool) -> Chunk:
    # The hot path of a big patch: plain locals, no per-line method calls.
    body, i, n = cur.lines, cur.pos, len(cur.lines)
    number = cur.offset + i
    hints: list[str] = []
    range_start: int | None = None
    range_count: int | None = None
    saw_header = False
    while i < n:
        line = body[i]
        if not line.startswith("@@"):
            break
        saw_header = True
        if line != "@@":  # a bare "@@" has no hint and no range
            hint, start, count = _parse_header(line)
            if hint is not None:
                hints.append(hint)
            if start is not None:
                range_start, range_count = start, count
        i += 1
    cur.pos = i
    if not saw_header and not first:
        raise _fail(
            f"expected a chunk header starting with '@@' in '{UPDATE} {path}', got "
            f"{cur.line!r}. Every line of a chunk starts with ' ' (context), '-' (removed) "
            "or '+' (added).",
            cur.number,
            path=path,
        )
    lines: list[tuple[Tag, str]] = []
    end_of_file = False
    append = lines.append
    while i < n:
        line = body[i]
        if not line:
            append(_BLANK)
        else:
            tag = line[0]
            if tag == " " or tag == "-" or tag == "+":
                append((tag, line[1:]))  # type: ignore[arg-type]
            else:
                if line.strip() == EOF_MARKER and lines:
                    end_of_file = True
                    i += 1
                break
        i += 1
    cur.pos = i
    if not lines:
        got = repr(cur.line) if not cur.at_end() else "the end of the patch"
        raise _fail(
            f"a chunk in '{UPDATE} {path}' has no lines (got {got}); every line of a chunk "
            "starts with ' ' (context), '-' (removed) or '+' (added).",
            cur.number if not cur.at_end() else number,
            path=path,
        )
    if i < n and not end_of_file:
        nxt = body[i]
        if not (nxt.startswith(("@@", "***")) or _is_header(nxt)):
            raise _fail(
                f"unexpected line {nxt!r} in '{UPDATE} {path}'; every line of a chunk starts "
                "with ' ' (context), '-' (removed) or '+' (added), and a new chunk starts "
                "with '@@'.",
                cur.number,
                path=path,
            )
    return Chunk(tuple(hints), range_start, range_count, tuple(lines), end_of_file, number)


def _check_distinct(ops: list[Operation]) -> None:
    seen: dict[str, int] = {}
    for op in ops:
        targets = [op.path]
        if isinstance(op, UpdateFile) and op.move_to is not None and op.move_to != op.path:
            targets.append(op.move_to)
        for target in targets:
            if target in seen:
                raise _fail(
                    f"two operations touch {target!r} (lines {seen[target]} and "
                    f"{op.line_number}); combine them into one section.",
                    op.line_number,
                    path=target,
                )
            seen[target] = op.line_number
    for target, line in seen.items():
        parts = target.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent in seen:
                raise _fail(
                    f"{parent!r} (line {seen[parent]}) is a file in this patch, so {target!r} "
                    "cannot lie under it; use separate patches.",
                    line,
                    path=target,
                )
