"""The watch registry: keys, idempotent operations, JSON round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airlock.client.prwatch import (
    WatchState,
    active,
    cancel,
    complete,
    delete,
    get_state,
    key,
    parse_key,
    put_state,
    register,
    status,
)


def test_key() -> None:
    assert key("o/r", 42) == "o/r#42"
    assert parse_key("o/r#42") == ("o/r", 42)


@pytest.mark.parametrize(
    ("repo", "number"),
    [
        ("o", 1),
        ("o/r/x", 1),
        ("/r", 1),
        ("o/", 1),
        ("o/r#1", 2),
        ("o/r", 0),
        ("o/r", -3),
        ("o/r", True),
    ],
)
def test_key_rejects_malformed(repo: str, number: Any) -> None:
    with pytest.raises(ValueError):
        key(repo, number)


@pytest.mark.parametrize("bad", ["o/r", "o/r#", "o/r#x", "#3", "o#3"])
def test_parse_key_rejects_malformed(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_key(bad)


def test_register_is_idempotent_and_keeps_state() -> None:
    reg: dict[str, Any] = {}
    assert register(reg, "o/r", 42, data={"agent": "a1"}) is reg
    put_state(reg, "o/r#42", WatchState(head_sha="abc", polls=3))
    before = json.dumps(reg, sort_keys=True)
    register(reg, "o/r", 42, data={"agent": "other"})
    register(reg, "o/r#42")
    assert json.dumps(reg, sort_keys=True) == before
    assert reg["o/r#42"]["data"] == {"agent": "a1"}
    assert get_state(reg, "o/r", 42).head_sha == "abc"


def test_complete_cancel_delete_are_idempotent() -> None:
    reg: dict[str, Any] = {}
    register(reg, "o/r", 1)
    register(reg, "o/r", 2)
    register(reg, "o/r", 3)
    for _ in range(2):
        complete(reg, "o/r", 1)
        cancel(reg, "o/r#2")
        delete(reg, "o/r", 3)
    assert status(reg, "o/r", 1) == "completed"
    assert status(reg, "o/r", 2) == "cancelled"
    assert status(reg, "o/r", 3) is None and "o/r#3" not in reg
    # Finishing twice in different ways keeps the first outcome.
    cancel(reg, "o/r", 1)
    complete(reg, "o/r", 2)
    assert (status(reg, "o/r#1"), status(reg, "o/r#2")) == ("completed", "cancelled")
    # Operations on unknown keys are harmless no-ops.
    snapshot = json.dumps(reg, sort_keys=True)
    complete(reg, "x/y", 9)
    cancel(reg, "x/y", 9)
    delete(reg, "x/y", 9)
    assert json.dumps(reg, sort_keys=True) == snapshot


def test_register_after_finish_starts_a_new_watch() -> None:
    reg: dict[str, Any] = {}
    register(reg, "o/r", 5)
    put_state(reg, "o/r#5", WatchState(head_sha="old"))
    complete(reg, "o/r", 5)
    register(reg, "o/r", 5)
    assert status(reg, "o/r", 5) == "active"
    assert get_state(reg, "o/r#5").head_sha is None


def test_active_and_json_round_trip() -> None:
    reg: dict[str, Any] = {}
    for n in (3, 1, 2):
        register(reg, "o/r", n)
    cancel(reg, "o/r", 2)
    assert active(reg) == ["o/r#1", "o/r#3"]
    restored = json.loads(json.dumps(reg))
    assert restored == reg
    assert active(restored) == ["o/r#1", "o/r#3"]
    assert get_state(restored, "o/r#1") == WatchState()


def test_get_state_of_unknown_key_is_fresh() -> None:
    assert get_state({}, "o/r", 1) == WatchState()
    reg: dict[str, Any] = {}
    put_state(reg, "o/r#1", WatchState(head_sha="x"))
    assert reg == {}
