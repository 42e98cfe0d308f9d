"""The audit log: JSON lines, written off the event loop.

Events: ``session_created|session_deleted|session_expired``,
``lease_created|lease_replaced|lease_deleted|lease_expired``, ``swap``,
``swap_skipped`` and ``refusal`` (with a ``reason``). Callers pass metadata
only; this module never sees a token. Paths are logged without their query
string, the one place a request could carry something token-like.

Writes go through a queue to one writer thread, so a slow disk never blocks
the proxy's event loop.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import queue
import threading
from pathlib import Path
from typing import Any

_STOP = object()


def audit_path_of(path: str) -> str:
    """A request path as the audit log records it: no query, bounded length."""
    return path.split("?", 1)[0][:512]


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._file = os.fdopen(fd, "a", encoding="utf-8", buffering=1)
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="airlock-audit", daemon=True)
        self._thread.start()

    def write(self, event: str, **fields: Any) -> None:
        record = {
            "ts": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
            "event": event,
            **{k: v for k, v in fields.items() if v is not None},
        }
        self._queue.put(json.dumps(record, separators=(",", ":"), default=str))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            assert isinstance(item, str)
            self._file.write(item + "\n")

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout=5)
        self._file.close()
