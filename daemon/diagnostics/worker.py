"""The diagnostics worker process: ``python -m airlock.daemon.diagnostics.worker``.

Reads one JSON request per line on stdin, answers one JSON line on stdout, and
exits at end of input (so it dies with the daemon). It owns the CPU-bound
checks, ``syntax`` and ``whitespace``, because tree-sitter and Python's parser
hold the GIL: in the daemon they would stall every other request while a
large file is parsed. The daemon sends each file's bytes after the request
line (``content_bytes``): it reads them through its resolver, fd-relative
beneath a root, so a folder swapped for a symlink mid-call is refused there
and this process (which runs as the daemon's user) never opens a workspace
path itself. An editing tool's after-check sends the bytes it is about to
write, so that check runs while the write and its fsyncs do. ``path`` only names
the file (its language, the incremental state kept for it).

Request:  {"id": 1, "path": "/real/path", "display": "src/a.py",
           "checks": ["syntax", "whitespace"], "max_bytes": 67108864,
           "content_bytes": N}, then exactly N bytes: the file's content
Response: {"id": 1, "state": "ok" | "binary" | "too_large" | "unreadable",
           "detail": "...", "results": {"syntax": {"applicable": true, "findings": [...],
           "error": null}}}
"""

from __future__ import annotations

import json
import os
import select
import sys
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..errors import BinaryFile
from ..text import decode
from . import incremental, linediff, precise
from .incremental import SyntaxState, Version
from .languages import language_of, shebang_language
from .model import Finding
from .syntax import (
    SUPPORTED_LANGUAGES,
    GrammarUnavailable,
    SyntaxChecker,
)
from .whitespace import WhitespaceState, check_lines, recheck_lines

_VERSIONS_KEPT = 16
"""Files whose last version (text, trees) is kept for incremental re-checks."""
_VERSION_MAX_CHARS = 16 * 1024 * 1024
"""Larger files are not kept (16 of them would cost gigabytes): checked in full each time."""


def _dump(findings: list[Finding]) -> list[dict[str, Any]]:
    return [{**asdict(f.diagnostic), "anchor": f.anchor} for f in findings]


class Worker:
    def __init__(self, *, incremental: bool = True) -> None:
        self.syntax = SyntaxChecker()
        self.incremental = incremental
        """False: every request is checked in full (the property test's reference)."""
        self._versions: OrderedDict[tuple[str, str], _Known] = OrderedDict()
        self.paths: Counter[str] = Counter()
        """Which path each check took ("whitespace:incremental", "syntax:full"...): tests."""

    def handle(self, req: dict[str, Any], content: bytes | None) -> dict[str, Any]:
        """Check ``content``, the bytes of the file ``req`` names (as read by the daemon, or
        about to be written by an edit). Never reads the file itself."""
        path = Path(req["path"])
        display = str(req.get("display", path))
        answer: dict[str, Any] = {"id": req.get("id"), "state": "ok", "results": {}}
        limit = int(req.get("max_bytes", 64 * 1024 * 1024))
        if content is None:
            detail = "no content_bytes: the daemon sends every file's bytes"
            return {**answer, "state": "unreadable", "detail": detail}
        data = content
        if len(data) > limit:
            return {**answer, "state": "too_large"}
        checks = tuple(str(c) for c in req.get("checks", []))
        try:
            text = decode(data, path=display).text
        except BinaryFile:
            return {**answer, "state": "binary"}
        version = Version(text, text.split("\n"))
        known = self._versions.pop((str(path), display), None) if self.incremental else None
        found = linediff.regions(known.version.lines, version.lines) if known else None
        current = _Known(version)
        for check in checks:
            answer["results"][check] = self._run(check, path, text, display, known, found, current)
        if len(text) <= _VERSION_MAX_CHARS:  # bounded memory: huge files are checked in full
            self._versions[(str(path), display)] = current
        while len(self._versions) > _VERSIONS_KEPT:
            self._versions.popitem(last=False)
        return answer

    def _run(
        self,
        check: str,
        path: Path,
        text: str,
        display: str,
        known: _Known | None,
        found: list[linediff.Region] | None,
        current: _Known,
    ) -> dict[str, Any]:
        if check == "whitespace":
            markdown = path.suffix.lower() in (".md", ".markdown")
            lines = current.version.lines
            if lines and lines[-1] == "":
                lines = lines[:-1]
            previous = known.whitespace if known is not None else None
            if (
                known is not None
                and previous is not None
                and found is not None
                and previous.markdown == markdown
            ):
                self.paths["whitespace:incremental"] += 1
                state = recheck_lines(previous, known.text_lines(), lines, found, display)
            else:
                self.paths["whitespace:full"] += 1
                state = check_lines(lines, display, markdown=markdown)
            current.whitespace = state
            current._text_lines = lines
            return {"applicable": True, "findings": _dump(state.findings)}
        if check == "syntax":
            language = language_of(path) or shebang_language(text.split("\n", 1)[0])
            if language is None or language not in SUPPORTED_LANGUAGES:
                return {"applicable": False, "findings": []}
            try:
                findings = self._syntax(language, text, display, known, found, current)
            except GrammarUnavailable as exc:
                return {"applicable": True, "findings": [], "error": str(exc)}
            return {"applicable": True, "findings": _dump(findings)}
        return {"applicable": False, "findings": [], "error": f"unknown check {check!r}"}

    def _syntax(
        self,
        language: str,
        text: str,
        display: str,
        known: _Known | None,
        found: list[linediff.Region] | None,
        current: _Known,
    ) -> list[Finding]:
        version = current.version
        before = known.version.syntax.get(language) if known is not None else None
        if before is not None and known is not None and found is not None:
            fast = self._fast(language, text, display, known, found, before, version)
            if fast is not None:
                self.paths["syntax:incremental"] += 1
                return fast
        self.paths["syntax:full"] += 1
        findings, tree = self.syntax.check_tree(language, text, version.data, display)
        state = SyntaxState(tree, findings)
        if language == "python" and not findings:
            state.partition = incremental.partition_of(tree)
        version.syntax[language] = state
        return findings

    def _fast(
        self,
        language: str,
        text: str,
        display: str,
        known: _Known,
        found: list[linediff.Region],
        before: SyntaxState,
        version: Version,
    ) -> list[Finding] | None:
        """The full check's answer from the changed regions only, or None: check in full.

        Python: the full check answers [] exactly when ``ast`` accepts the file, which
        the changed statements decide (``python_recheck``); tree-sitter is not needed.
        ``paths`` counts the runs re-parsed inside blocks ("syntax:python-block") and
        the top-level chunks ("syntax:python-toplevel").
        Other languages: tree-sitter re-parses incrementally; a clean tree is [] (plus
        the exact parser's verdict where there is one).
        """
        if language == "python":
            if before.partition is None:
                return None
            rechecked = incremental.python_recheck(before.partition, version.lines, found)
            if rechecked is None:
                return None
            self.paths["syntax:python-block"] += rechecked.runs
            self.paths["syntax:python-toplevel"] += rechecked.chunks
            version.syntax[language] = SyntaxState(None, [], rechecked.module)
            return []
        if before.tree is None:
            return None
        tree = before.tree.copy()
        if not incremental.edit_tree(tree, known.version, version, found):
            return None
        tree = self.syntax.reparse(language, version.data, tree)
        if tree.root_node.has_error:
            return None
        findings = (
            precise.combine(language, text, display, []) if language in precise.POLICIES else []
        )
        version.syntax[language] = SyntaxState(tree, findings)
        return findings


class _Known:
    """A file's last version and each check's state for it."""

    def __init__(self, version: Version) -> None:
        self.version = version
        self.whitespace: WhitespaceState | None = None
        self._text_lines: list[str] | None = None

    def text_lines(self) -> list[str]:
        if self._text_lines is None:
            lines = self.version.lines
            self._text_lines = lines[:-1] if lines and lines[-1] == "" else lines
        return self._text_lines


IDLE_EXIT_S = 600.0
"""An unused worker exits on its own; the daemon starts a new one on demand."""


class FrameError(Exception):
    """The input is not a request line (and its content): the stream cannot be trusted."""


def request_frames(fd: int, idle_s: float) -> Iterator[tuple[dict[str, Any], bytes | None]]:
    """Requests from ``fd``, each with its inline content, until end of input, idleness,
    or the parent going away.

    The parent check matters when the daemon is killed while another process
    still holds the pipe's write end (a forked child): EOF would never come.
    A line that is not a JSON object raises :class:`FrameError`: without its
    header the length of any content after it is unknown, so nothing that
    follows can be framed.
    """
    parent = os.getppid()
    buffer = bytearray()
    idle = 0.0

    def fill() -> bool:
        nonlocal idle
        while True:
            ready, _, _ = select.select([fd], [], [], 5.0)
            if ready:
                break
            idle += 5.0
            if os.getppid() != parent or idle >= idle_s:
                return False
        idle = 0.0
        chunk = os.read(fd, 1 << 20)
        buffer.extend(chunk)
        return bool(chunk)

    while True:
        while (end := buffer.find(b"\n")) < 0:
            if not fill():
                return
        line = bytes(buffer[:end])
        del buffer[: end + 1]
        try:
            req = json.loads(line)
        except ValueError as exc:
            raise FrameError(f"not a JSON request line: {exc}") from None
        if not isinstance(req, dict):
            raise FrameError("a request must be a JSON object")
        size = req.get("content_bytes")
        content: bytes | None = None
        if size is not None:
            if not isinstance(size, int) or size < 0:
                raise FrameError("content_bytes must be a non-negative integer")
            while len(buffer) < size:
                if not fill():
                    return
            content = bytes(buffer[:size])
            del buffer[:size]
        yield req, content


def main() -> None:
    worker = Worker()
    out = sys.stdout
    try:
        for req, content in request_frames(sys.stdin.fileno(), IDLE_EXIT_S):
            try:
                answer = worker.handle(req, content)
            except Exception as exc:
                answer = {"id": req.get("id"), "state": "unreadable"}
                answer["detail"] = f"worker error: {exc!r}"
            out.write(json.dumps(answer) + "\n")
            out.flush()
    except FrameError as exc:  # the daemon sees the exit and starts a fresh worker
        sys.stderr.write(f"airlock diagnostics worker: {exc}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
