"""The proxy's own log never carries a real token either.

mitmproxy logs protocol trouble with the offending bytes (``Unexpected data
from server: b'...'``, event reprs in a crash traceback), and those bytes can
be an upstream's reflection of a swapped header. :func:`install` puts a filter
on every root handler that scrubs each record (message and formatted
traceback) with the forms of recently swapped tokens: a
:class:`SwappedForms` the swap concern feeds (``ProxyContext.swapped_forms``)
and the proxy's runner hands to :func:`airlock.proxy.mitm.install`.
"""

from __future__ import annotations

import collections
import logging

from ..scrubber import scrub

MAX_FORMS = 100_000


class SwappedForms:
    """Forms of recently swapped tokens (real -> shown), most recently used last, bounded."""

    def __init__(self, max_forms: int = MAX_FORMS) -> None:
        self._max = max_forms
        self._recent: collections.OrderedDict[bytes, bytes] = collections.OrderedDict()

    def remember(self, forms: dict[bytes, bytes]) -> None:
        """Forms of a token just swapped (real -> shown)."""
        for real, shown in forms.items():
            self._recent[real] = shown
            self._recent.move_to_end(real)
        while len(self._recent) > self._max:
            self._recent.popitem(last=False)

    def __len__(self) -> int:
        return len(self._recent)

    def scrub_text(self, text: str) -> str:
        if not self._recent or not text:
            return text
        raw = text.encode("utf-8", "surrogateescape")
        clean = scrub(raw, self._recent)
        return text if clean == raw else clean.decode("utf-8", "surrogateescape")


class ScrubFilter(logging.Filter):
    """Rewrites a record in place with ``forms``; never drops one."""

    _formatter = logging.Formatter()

    def __init__(self, forms: SwappedForms) -> None:
        super().__init__()
        self.forms = forms

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.forms:
            return True
        message = record.getMessage()
        clean = self.forms.scrub_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.forms.scrub_text(record.exc_text)
        return True


_installed: list[tuple[logging.Handler, ScrubFilter]] = []


def install(forms: SwappedForms) -> None:
    """Add a filter scrubbing with ``forms`` to every handler of the root logger."""
    uninstall()
    log_filter = ScrubFilter(forms)
    for handler in logging.getLogger().handlers:
        handler.addFilter(log_filter)
        _installed.append((handler, log_filter))


def uninstall() -> None:
    while _installed:
        handler, log_filter = _installed.pop()
        handler.removeFilter(log_filter)
