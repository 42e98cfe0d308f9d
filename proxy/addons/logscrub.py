"""The proxy's own log never carries a real token either.

mitmproxy logs protocol trouble with the offending bytes (``Unexpected data
from server: b'...'``, event reprs in a crash traceback), and those bytes can
be an upstream's reflection of a swapped header. :func:`install` puts a filter
on every root handler that scrubs each record (message and formatted
traceback) with the forms of recently swapped tokens (:func:`remember`, kept
in a bounded most-recently-used table).
"""

from __future__ import annotations

import collections
import logging

from ..scrubber import scrub

MAX_FORMS = 100_000
_recent: collections.OrderedDict[bytes, bytes] = collections.OrderedDict()


def remember(forms: dict[bytes, bytes]) -> None:
    """Forms of a token just swapped (real -> shown)."""
    for real, shown in forms.items():
        _recent[real] = shown
        _recent.move_to_end(real)
    while len(_recent) > MAX_FORMS:
        _recent.popitem(last=False)


def scrub_text(text: str) -> str:
    if not _recent or not text:
        return text
    raw = text.encode("utf-8", "surrogateescape")
    clean = scrub(raw, _recent)
    return text if clean == raw else clean.decode("utf-8", "surrogateescape")


class ScrubFilter(logging.Filter):
    """Rewrites a record in place; never drops one."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        if not _recent:
            return True
        message = record.getMessage()
        clean = scrub_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub_text(record.exc_text)
        return True


_FILTER = ScrubFilter()


def install() -> None:
    """Add the filter to every handler of the root logger (idempotent)."""
    for handler in logging.getLogger().handlers:
        if _FILTER not in handler.filters:
            handler.addFilter(_FILTER)
