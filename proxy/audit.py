"""The audit log: JSON lines, written off the event loop.

Events: ``session_created|session_deleted|session_expired``,
``lease_created|lease_replaced|lease_deleted|lease_expired``, ``swap``,
``swap_skipped`` and ``refusal`` (with a ``reason``). Callers pass metadata
only; this module never sees a token. Paths are logged without their query
string, the one place a request could carry something token-like.

``write`` only appends to an in-memory deque; one writer thread drains it in
batches every ``interval_s``, so neither a slow disk nor per-line thread
hand-offs cost the event loop anything on the request path.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import threading
from pathlib import Path
from typing import Any


def audit_path_of(path: str) -> str:
    """A request path as the audit log records it: no query, bounded length."""
    return path.split("?", 1)[0][:512]


class AuditLog:
    def __init__(self, path: Path, *, interval_s: float = 0.05) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._file = os.fdopen(fd, "a", encoding="utf-8")
        self._pending: collections.deque[str] = collections.deque()
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="airlock-audit", daemon=True)
        self._thread.start()

    def write(self, event: str, **fields: Any) -> None:
        record = {
            "ts": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
            "event": event,
            **{k: v for k, v in fields.items() if v is not None},
        }
        self._pending.append(json.dumps(record, separators=(",", ":"), default=str))

    def _drain(self) -> None:
        lines: list[str] = []
        while self._pending:
            lines.append(self._pending.popleft())
        if lines:
            self._file.write("\n".join(lines) + "\n")
            self._file.flush()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._drain()
        self._drain()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._drain()
        self._file.close()
