"""The diagnostics worker process: ``python -m airlock.daemon.diagnostics.worker``.

Reads one JSON request per line on stdin, answers one JSON line on stdout, and
exits at end of input (so it dies with the daemon). It owns the CPU-bound
checks, ``syntax`` and ``whitespace``, because tree-sitter and Python's parser
hold the GIL: in the daemon they would stall every other request while a
large file is parsed. Requests name a file; the worker reads it itself, so a
1 MB file is never copied through the pipe.

Request:  {"id": 1, "path": "/real/path", "display": "src/a.py",
           "checks": ["syntax", "whitespace"], "max_bytes": 67108864}
Response: {"id": 1, "state": "ok" | "missing" | "binary" | "too_large" | "unreadable",
           "detail": "...", "results": {"syntax": {"applicable": true, "findings": [...],
           "error": null}}}
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import sys
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from airlock.daemon.diagnostics.languages import language_of, shebang_language
from airlock.daemon.diagnostics.model import Finding
from airlock.daemon.diagnostics.syntax import (
    SUPPORTED_LANGUAGES,
    GrammarUnavailable,
    SyntaxChecker,
)
from airlock.daemon.diagnostics.whitespace import check_whitespace
from airlock.daemon.errors import BinaryFile
from airlock.daemon.text import decode

_ANSWERS_KEPT = 64
"""Answers remembered by (file, checks, content hash): syntax and whitespace depend on
the bytes alone, so the baseline of edit N+1 is edit N's result, free."""


def _dump(findings: list[Finding]) -> list[dict[str, Any]]:
    return [{**asdict(f.diagnostic), "anchor": f.anchor} for f in findings]


class Worker:
    def __init__(self) -> None:
        self.syntax = SyntaxChecker()
        self._answers: OrderedDict[tuple[str, str, tuple[str, ...], bytes], dict[str, Any]] = (
            OrderedDict()
        )

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        path = Path(req["path"])
        display = str(req.get("display", path))
        answer: dict[str, Any] = {"id": req.get("id"), "state": "ok", "results": {}}
        try:
            with open(path, "rb") as handle:
                data = handle.read(int(req.get("max_bytes", 64 * 1024 * 1024)) + 1)
        except (FileNotFoundError, NotADirectoryError):
            return {**answer, "state": "missing"}
        except IsADirectoryError:
            return {**answer, "state": "missing", "detail": "a directory"}
        except OSError as exc:
            return {**answer, "state": "unreadable", "detail": str(exc)}
        if len(data) > int(req.get("max_bytes", 64 * 1024 * 1024)):
            return {**answer, "state": "too_large"}
        checks = tuple(str(c) for c in req.get("checks", []))
        key = (str(path), display, checks, hashlib.sha256(data).digest())
        cached = self._answers.get(key)
        if cached is not None:  # an edit's result is the next edit's baseline
            self._answers.move_to_end(key)
            return {**answer, **cached}
        try:
            text = decode(data, path=display).text
        except BinaryFile:
            return {**answer, "state": "binary"}
        for check in checks:
            answer["results"][check] = self._run(check, path, text, display)
        self._answers[key] = {"state": "ok", "results": answer["results"]}
        while len(self._answers) > _ANSWERS_KEPT:
            self._answers.popitem(last=False)
        return answer

    def _run(self, check: str, path: Path, text: str, display: str) -> dict[str, Any]:
        if check == "whitespace":
            markdown = path.suffix.lower() in (".md", ".markdown")
            return {
                "applicable": True,
                "findings": _dump(check_whitespace(text, display, markdown=markdown)),
            }
        if check == "syntax":
            language = language_of(path) or shebang_language(text.split("\n", 1)[0])
            if language is None or language not in SUPPORTED_LANGUAGES:
                return {"applicable": False, "findings": []}
            try:
                return {
                    "applicable": True,
                    "findings": _dump(self.syntax.check(language, text, display)),
                }
            except GrammarUnavailable as exc:
                return {"applicable": True, "findings": [], "error": str(exc)}
        return {"applicable": False, "findings": [], "error": f"unknown check {check!r}"}


IDLE_EXIT_S = 600.0
"""An unused worker exits on its own; the daemon starts a new one on demand."""


def request_lines(fd: int, idle_s: float) -> Iterator[bytes]:
    """Lines from ``fd`` until end of input, idleness, or the parent going away.

    The parent check matters when the daemon is killed while another process
    still holds the pipe's write end (a forked child): EOF would never come.
    """
    parent = os.getppid()
    buffer = b""
    idle = 0.0
    while True:
        ready, _, _ = select.select([fd], [], [], 5.0)
        if not ready:
            idle += 5.0
            if os.getppid() != parent or idle >= idle_s:
                return
            continue
        idle = 0.0
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line


def main() -> None:
    worker = Worker()
    out = sys.stdout
    for raw in request_lines(sys.stdin.fileno(), IDLE_EXIT_S):
        try:
            req = json.loads(raw)
            answer = worker.handle(req)
        except Exception as exc:
            answer = {"id": None, "state": "unreadable", "detail": f"worker error: {exc!r}"}
            with contextlib.suppress(ValueError, AttributeError):
                answer["id"] = json.loads(raw).get("id")
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
