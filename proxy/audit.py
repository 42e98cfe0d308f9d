"""The audit log: JSON lines, written off the event loop.

Events: ``session_created|session_deleted|session_expired``,
``lease_created|lease_replaced|lease_deleted|lease_expired``, ``swap``,
``swap_skipped``, ``refusal`` (with a ``reason``), ``tunnel_open``,
``tunnel_close``, ``request``, ``addon_error``, ``reload``, ``guard`` (the
connection-level guard closed a tunnel: ``reason``, ``detail``). Callers pass
metadata only; this module never sees a token. Paths are logged without their
query string, the one place a request could carry something token-like.

``write`` only appends to an in-memory deque; one writer thread drains it in
batches every ``interval_s``, so neither a slow disk nor per-line thread
hand-offs cost the event loop anything on the request path.

Refusals anyone can trigger in bulk (407 without credentials, 408 head
timeout, 429 limits, 431 huge heads) are *sampled*: per reason, the first
``sample_per_minute`` lines of each minute are written, the rest only counted
and reported as one ``refusals_suppressed`` line per reason when the minute
ends. Unauthenticated traffic cannot grow the log without bound.

:meth:`AuditLog.reopen` (SIGHUP) makes the writer thread close and reopen the
path, so ``logrotate``'s rename-then-HUP works without losing lines.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

SAMPLED_STATUSES = frozenset({407, 408, 429, 431})
# One encoder for every line (json.dumps with options builds a new one per call).
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


def audit_path_of(path: str) -> str:
    """A request path as the audit log records it: no query, bounded length."""
    return path.split("?", 1)[0][:512]


def _open(path: Path) -> Any:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    return os.fdopen(fd, "a", encoding="utf-8")


class AuditLog:
    def __init__(
        self, path: Path, *, interval_s: float = 0.05, sample_per_minute: int = 60
    ) -> None:
        self.path = path
        self._file = _open(path)
        self._pending: collections.deque[str] = collections.deque()
        self._interval = interval_s
        self._sample = sample_per_minute
        self._window = time.monotonic()
        # reason -> (written this minute, suppressed this minute)
        self._sampled: dict[str, list[int]] = {}
        self._sample_lock = threading.Lock()
        self._reopen = threading.Event()
        self.reopen_error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="airlock-audit", daemon=True)
        self._thread.start()

    def write(self, event: str, **fields: Any) -> None:
        if (
            event == "refusal"
            and fields.get("status") in SAMPLED_STATUSES
            and not self._admit(str(fields.get("reason")))
        ):
            return
        self._append(event, fields)

    def _admit(self, reason: str) -> bool:
        with self._sample_lock:
            counts = self._sampled.setdefault(reason, [0, 0])
            if counts[0] < self._sample:
                counts[0] += 1
                return True
            counts[1] += 1
            return False

    def _roll_window(self) -> None:
        """Writer thread: once a minute, report what was suppressed and reset."""
        if time.monotonic() - self._window < 60.0:
            return
        self._window = time.monotonic()
        with self._sample_lock:
            sampled, self._sampled = self._sampled, {}
        for reason, (_, suppressed) in sorted(sampled.items()):
            if suppressed:
                self._append("refusals_suppressed", {"reason": reason, "count": suppressed})

    def flush_samples(self) -> None:
        """Report suppressed counts now (tests, shutdown)."""
        self._window = 0.0
        self._roll_window()

    def reopen(self) -> None:
        """Ask the writer thread to reopen the path (after logrotate moved it)."""
        self._reopen.set()

    def _append(self, event: str, fields: dict[str, Any]) -> None:
        record = {
            "ts": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
            "event": event,
            **{k: v for k, v in fields.items() if v is not None},
        }
        self._pending.append(_ENCODER.encode(record))

    def _drain(self) -> None:
        self._roll_window()
        if self._reopen.is_set():
            self._reopen.clear()
            try:
                fresh = _open(self.path)
            except OSError as exc:  # keep writing to the old file rather than lose lines
                self.reopen_error = str(exc)
            else:
                self.reopen_error = None
                old, self._file = self._file, fresh
                old.close()
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
        self.flush_samples()
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._drain()
        self._file.close()
