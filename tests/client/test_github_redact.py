"""Redaction and tail truncation of the GitHub shell tool's output."""

from __future__ import annotations

import base64

from airlock.client.github.redact import (
    REDACTED,
    basic_credential,
    redact,
    secret_forms,
    truncate_tail,
)

TOKEN = "ghs_" + "A1b2C3d4" * 7  # 60 characters: tokens are not assumed to be 40


def test_raw_and_basic_forms_are_redacted() -> None:
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert basic_credential(TOKEN) == basic
    text = f"token={TOKEN}\nAuthorization: Basic {basic}\nunpadded {basic.rstrip('=')}\n"
    out = redact(text, secret_forms(TOKEN))
    assert TOKEN not in out
    assert basic.rstrip("=") not in out
    assert out.count(REDACTED) == 3


def test_unrelated_text_is_untouched() -> None:
    text = "nothing secret here: airlock-gh-1234"
    assert redact(text, secret_forms(TOKEN)) == text


def test_truncation_keeps_the_tail_with_a_prefix() -> None:
    text = "x" * 150_000 + "THE END"
    out, cut = truncate_tail(text, 100_000)
    assert cut
    assert out.startswith("[output truncated: showing final 100000 bytes]\n")
    assert out.endswith("THE END")
    assert len(out.split("\n", 1)[1].encode()) == 100_000
    short, cut2 = truncate_tail("small", 100_000)
    assert (short, cut2) == ("small", False)


def test_truncation_does_not_split_characters() -> None:
    text = "é" * 1000  # two bytes each
    out, cut = truncate_tail(text, 101)
    assert cut
    body = out.split("\n", 1)[1]
    assert set(body) == {"é"}
