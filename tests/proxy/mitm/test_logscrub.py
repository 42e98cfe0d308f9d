"""Log records are scrubbed of recently swapped tokens, traceback included."""

from __future__ import annotations

import io
import logging

from airlock.proxy.mitm import logscrub
from airlock.proxy.scrubber import token_forms
from tests.proxy.addons.conftest import PLACEHOLDER, REAL


def test_records_and_tracebacks_are_scrubbed() -> None:
    forms = logscrub.SwappedForms()
    forms.remember(token_forms(REAL, PLACEHOLDER))
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(logscrub.ScrubFilter(forms))
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


def test_the_table_is_bounded_and_keeps_the_most_recent() -> None:
    forms = logscrub.SwappedForms(max_forms=2)
    forms.remember({b"old-token": b"p-old"})
    forms.remember({b"mid-token": b"p-mid"})
    forms.remember({b"old-token": b"p-old"})  # used again: now the most recent
    forms.remember({b"new-token": b"p-new"})
    assert len(forms) == 2
    assert forms.scrub_text("old-token mid-token new-token") == "p-old mid-token p-new"


def test_install_filters_root_handlers_and_uninstall_removes_it() -> None:
    forms = logscrub.SwappedForms()
    forms.remember({REAL.encode(): PLACEHOLDER.encode()})
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        logscrub.install(forms)
        logging.getLogger("test.logscrub.root").warning("got %s", REAL)
        logscrub.uninstall()
        assert handler.filters == []
    finally:
        logscrub.uninstall()
        root.removeHandler(handler)
    assert REAL not in stream.getvalue() and PLACEHOLDER in stream.getvalue()
