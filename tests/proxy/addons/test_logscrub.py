"""Log records are scrubbed of recently swapped tokens, traceback included."""

from __future__ import annotations

import io
import logging

from airlock.proxy.addons import logscrub
from airlock.proxy.scrubber import token_forms
from tests.proxy.addons.conftest import PLACEHOLDER, REAL


def test_records_and_tracebacks_are_scrubbed() -> None:
    logscrub.remember(token_forms(REAL, PLACEHOLDER))
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(logscrub.ScrubFilter())
    log = logging.getLogger("test.logscrub")
    log.addHandler(handler)
    try:
        log.error("unexpected data: %r", f"Bearer {REAL}".encode())
        try:
            raise AssertionError(f"event data=bytearray(b'{REAL}')")
        except AssertionError:
            log.exception("crashed")
    finally:
        log.removeHandler(handler)
    text = stream.getvalue()
    assert "unexpected data" in text and "crashed" in text and "AssertionError" in text
    assert REAL not in text and PLACEHOLDER in text
