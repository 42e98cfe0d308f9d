"""The compiled matcher (proxy/form_scan.py) gives the Python path's answers, never
blocks the event loop on a compile, and a form set it cannot compile stays matched."""

from __future__ import annotations

import logging
import random
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airlock.proxy import form_scan
from airlock.proxy.scrubber import Forms, _flat, find_forms, scrub, token_forms

REAL = "ghs_SCAN0123456789abcdef0123456789abcdef"
PAIRS = token_forms(REAL, "airlock-gh-scan-placeholder-0000000000000", ["x-access-token"])
FORMS = sorted(PAIRS, key=len)
BREAKS = [b"\n", b"\r\n", b"\r", b"\n\n"]


def python_present(forms: Forms, data: bytes) -> bool:
    flat = _flat(data)
    return any(k in flat for k, _ in forms.minimal)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """Bytes with forms in them: whole, wrapped at any column, cut short, side by side."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    parts: list[bytes] = []
    for _ in range(draw(st.integers(0, 6))):
        parts.append(rng.randbytes(rng.randrange(0, 300)))
        form = rng.choice(FORMS)
        kind = draw(st.sampled_from(["whole", "wrapped", "cut", "broken-often"]))
        if kind == "wrapped":
            width = rng.randrange(1, 80)
            newline = rng.choice(BREAKS)
            form = newline.join(form[i : i + width] for i in range(0, len(form), width))
        elif kind == "cut":
            form = form[: rng.randrange(1, len(form))]
        elif kind == "broken-often":  # more line breaks than any wrapping leaves room for
            form = b"".join(bytes([c]) + b"\n" * rng.randrange(0, 4) for c in form)
        parts.append(form)
    parts.append(rng.randbytes(rng.randrange(0, 300)))
    return b"".join(parts)


@settings(max_examples=400, deadline=None)
@given(bodies())
def test_the_compiled_path_gives_the_python_answers(data: bytes) -> None:
    forms = Forms(PAIRS)
    scanner = form_scan.scanner_now(forms._needles)
    expected_present = python_present(forms, data)
    assert scanner.found(data) == expected_present
    expected_spans = find_forms(data, forms.ordered) if expected_present else []
    spans = forms._around(data, scanner.ends(data)) if expected_present else []
    assert spans == expected_spans
    assert bool(scanner.ends(data)) == expected_present


def test_a_run_of_line_breaks_longer_than_any_wrapping_is_still_found_and_scrubbed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(form_scan, "scanner_for", form_scan.scanner_now)
    token = REAL.encode()
    broken = token[:10] + b"\r\n" * 500 + token[10:]
    data = random.Random(1).randbytes(5000) + broken + random.Random(2).randbytes(5000)
    forms = Forms(PAIRS)
    assert forms.present(data)
    assert forms.scrub(data) == scrub(data, PAIRS)
    assert not Forms(PAIRS).present(forms.scrub(data))


def test_a_long_form_stretched_by_line_breaks_is_found_whole_anywhere_in_the_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The window around its minimal form cannot hold it (more line breaks than any
    wrapping): the whole buffer is searched instead, at the start, middle and end."""
    monkeypatch.setattr(form_scan, "scanner_for", form_scan.scanner_now)
    longest = FORMS[-1]  # Basic base64(user:token): contains a minimal form
    broken = b"".join(bytes([c]) + b"\r\n" * 3 for c in longest).rstrip(b"\r\n")
    filler = random.Random(4).randbytes(3000)
    forms = Forms(PAIRS)
    for data in (filler + broken, broken + filler, broken):
        expected = find_forms(data, forms.ordered)
        assert forms.find(data) == expected
        assert any(end - start > len(longest) for start, end, _ in expected)


def test_a_new_form_set_compiles_in_the_background_and_python_answers_meanwhile() -> None:
    needles = (b"airlock-compile-test-" + random.randbytes(8).hex().encode(),)
    assert form_scan.scanner_for(needles) is None  # compiling on the worker thread now
    form_scan.wait_for_compiles()
    scanner = form_scan.scanner_for(needles)
    assert scanner is not None
    assert scanner.found(b"xx" + needles[0][:5] + b"\r\n" + needles[0][5:] + b"yy")
    assert not scanner.found(b"xx" + needles[0][:-1] + b"yy")


def test_a_form_set_that_cannot_compile_stays_on_the_python_path(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="airlock.proxy.form_scan")
    broken = (b"",)  # matches the empty buffer: Hyperscan refuses it
    assert form_scan.scanner_for(broken) is None
    form_scan.wait_for_compiles()
    assert "matching it in Python" in caplog.text
    assert form_scan.failed_sets() >= 1  # /metrics: airlock_proxy_token_form_sets{state="failed"}
    caplog.clear()
    assert form_scan.scanner_for(broken) is None  # and it is not tried again
    form_scan.wait_for_compiles()
    assert "matching it in Python" not in caplog.text


def test_threads_scan_with_scratch_of_their_own() -> None:
    forms = Forms(PAIRS)
    scanner = form_scan.scanner_now(forms._needles)
    clean = random.Random(3).randbytes(64 * 1024)
    dirty = clean[:1000] + FORMS[0] + clean[1000:]
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(scanner.found, [clean, dirty] * 200))
    assert answers == [False, True] * 200
