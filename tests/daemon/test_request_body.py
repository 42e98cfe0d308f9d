"""``parse_json_body``: what ``json.loads`` accepts, with the daemon's refusals as envelopes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airlock.daemon.errors import AirlockError
from airlock.daemon.request_body import parse_json_body

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(value=values, encoding=st.sampled_from(["utf-8", "utf-16", "utf-32"]))
def test_the_same_value_json_loads_gives(value: object, encoding: str) -> None:
    raw = json.dumps(value).encode(encoding)
    try:
        expected = json.loads(raw)
    except ValueError:
        return
    try:
        got = parse_json_body(raw)
    except AirlockError as exc:  # lone surrogates are refused on purpose
        assert exc.code == "invalid_request" and "surrogate" in exc.message
        return
    assert got == expected or (not raw.strip() and got == {})


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b'{"a": NaN}', "not JSON"),
        (b'{"a": Infinity}', "not JSON"),
        (b"\xff\xfe{", "UTF-8"),
        (b'{"a": ', "not valid JSON"),
        (b"[" * 100 + b"]" * 100, "nested too deeply"),
    ],
)
def test_bad_bodies_are_envelopes(raw: bytes, words: str) -> None:
    with pytest.raises(AirlockError) as info:
        parse_json_body(raw)
    assert info.value.code == "invalid_request"
    assert words in info.value.message
