"""Table-driven tests of the pure PR-watch primitives: snapshot, advance,
frame_wake and the retry rules. No I/O anywhere in this file."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import aiohttp
import pytest

from airlock.client.prwatch import (
    RetryPolicy,
    Snapshot,
    Wake,
    WatchState,
    advance,
    backoff,
    classify,
    classify_error,
    classify_status,
    frame_wake,
    initial_state,
    server_delay,
    snapshot,
)
from airlock.client.prwatch.snapshot import Check, Review

OWNER = "alice"


def pr_json(
    head: str = "a" * 40,
    *,
    state: str = "open",
    merged: bool = False,
    draft: bool = False,
    mergeable: bool | None = True,
    author: str = "agent-bot",
) -> dict[str, Any]:
    return {
        "number": 7,
        "title": "Fix parser",
        "state": state,
        "merged": merged,
        "merged_at": "2026-01-01T00:00:00Z" if merged else None,
        "draft": draft,
        "mergeable": mergeable,
        "mergeable_state": "clean",
        "html_url": "https://github.com/o/r/pull/7",
        "user": {"login": author},
        "head": {"sha": head, "ref": "feature"},
        "base": {"repo": {"full_name": "o/r"}},
    }


def run(
    name: str, status: str, conclusion: str | None, head: str = "a" * 40, rid: int = 1
) -> dict[str, Any]:
    return {
        "id": rid,
        "name": name,
        "status": status,
        "conclusion": conclusion,
        "head_sha": head,
        "started_at": f"2026-01-01T00:00:{rid:02d}Z",
    }


def review(
    rid: int, state: str, commit: str, user: str = OWNER, at: str | None = None
) -> dict[str, Any]:
    return {
        "id": rid,
        "user": {"login": user},
        "state": state,
        "commit_id": commit,
        "submitted_at": at or f"2026-01-01T00:{rid:02d}:00Z",
    }


# ---------------------------------------------------------------- snapshot


@pytest.mark.parametrize(
    ("runs", "statuses", "combined"),
    [
        ([], [], "none"),
        ([run("ci", "completed", "success")], [], "success"),
        ([run("ci", "in_progress", None)], [], "pending"),
        ([run("ci", "queued", None), run("lint", "completed", "failure", rid=2)], [], "failure"),
        (
            [run("ci", "completed", "neutral"), run("x", "completed", "skipped", rid=2)],
            [],
            "success",
        ),
        ([run("ci", "completed", "timed_out")], [], "failure"),
        ([run("ci", "completed", "cancelled")], [], "failure"),
        ([run("ci", "completed", "success")], [{"context": "legacy", "state": "error"}], "failure"),
        ([], [{"context": "legacy", "state": "pending"}], "pending"),
        ([], [{"context": "legacy", "state": "success"}], "success"),
        # A re-run supersedes the failed run of the same name.
        (
            [run("ci", "completed", "failure", rid=1), run("ci", "completed", "success", rid=2)],
            [],
            "success",
        ),
        # A run for another commit is not this head's.
        ([run("ci", "completed", "failure", head="b" * 40)], [], "none"),
    ],
)
def test_snapshot_combined_checks(
    runs: list[dict[str, Any]], statuses: list[dict[str, Any]], combined: str
) -> None:
    snap = snapshot(
        pr_json(),
        check_runs={"total_count": len(runs), "check_runs": runs},
        status={"state": "x", "statuses": statuses},
        reviews=[],
        owner=OWNER,
    )
    assert snap.combined == combined


def test_snapshot_fields() -> None:
    head = "c" * 40
    snap = snapshot(
        pr_json(head, draft=True, mergeable=False),
        check_runs=[run("ci", "completed", "failure", head=head)],
        reviews=[review(1, "APPROVED", head)],
        owner=OWNER,
    )
    assert (snap.repo, snap.number, snap.head_sha, snap.head_ref) == ("o/r", 7, head, "feature")
    assert snap.draft is True and snap.mergeable is False and snap.state == "open"
    assert [c.name for c in snap.failing_checks] == ["ci"]
    assert snap.review is not None and snap.review.state == "APPROVED"


@pytest.mark.parametrize(
    ("state", "merged", "expected"),
    [("open", False, "open"), ("closed", False, "closed"), ("closed", True, "merged")],
)
def test_snapshot_pr_state(state: str, merged: bool, expected: str) -> None:
    assert snapshot(pr_json(state=state, merged=merged)).state == expected


@pytest.mark.parametrize(
    ("reviews", "expected"),
    [
        ([], None),
        ([review(1, "APPROVED", "a" * 40)], "APPROVED"),
        # The owner's latest review is on another head: it does not count.
        ([review(1, "APPROVED", "a" * 40), review(2, "CHANGES_REQUESTED", "b" * 40)], None),
        ([review(1, "CHANGES_REQUESTED", "b" * 40), review(2, "COMMENTED", "a" * 40)], "COMMENTED"),
        # Somebody else's review never counts.
        ([review(1, "APPROVED", "a" * 40, user="mallory")], None),
        # A pending (unsubmitted) review does not count.
        ([review(1, "PENDING", "a" * 40)], None),
        # Login comparison is case-insensitive.
        ([review(3, "APPROVED", "a" * 40, user="Alice")], "APPROVED"),
    ],
)
def test_snapshot_owner_review_only_on_live_head(
    reviews: list[dict[str, Any]], expected: str | None
) -> None:
    snap = snapshot(pr_json("a" * 40), reviews=reviews, owner=OWNER)
    assert (snap.review.state if snap.review else None) == expected


def test_snapshot_owner_defaults_to_pr_author() -> None:
    snap = snapshot(pr_json(author="alice"), reviews=[review(1, "COMMENTED", "a" * 40)])
    assert snap.owner == "alice" and snap.review is not None


def test_snapshot_accepts_one_bundled_dict() -> None:
    bundled = pr_json() | {
        "check_runs": [run("ci", "completed", "failure")],
        "reviews": [review(1, "APPROVED", "a" * 40)],
    }
    snap = snapshot(bundled, owner=OWNER)
    assert snap.combined == "failure" and snap.review is not None


# ---------------------------------------------------------------- advance

H1, H2, H3 = "1" * 40, "2" * 40, "3" * 40


def snap(
    head: str = H1,
    checks: str = "none",
    review_state: str | None = None,
    review_id: int = 1,
    review_head: str | None = None,
    state: str = "open",
) -> Snapshot:
    """A snapshot built through ``snapshot`` itself from compact arguments."""
    runs = []
    if checks != "none":
        status, conclusion = {
            "success": ("completed", "success"),
            "failure": ("completed", "failure"),
            "pending": ("in_progress", None),
        }[checks]
        runs = [run("ci", status, conclusion, head=head)]
    reviews = (
        [review(review_id, review_state, review_head or head)] if review_state is not None else []
    )
    return snapshot(
        pr_json(head, state="closed" if state != "open" else "open", merged=state == "merged"),
        check_runs=runs,
        reviews=reviews,
        owner=OWNER,
    )


def kinds_for(steps: list[Snapshot], stall_polls: int = 4) -> list[tuple[str, ...] | None]:
    state = initial_state()
    out: list[tuple[str, ...] | None] = []
    for step in steps:
        state, wake = advance(state, step, stall_polls=stall_polls)
        out.append(wake.kinds if wake else None)
        # The state must survive a JSON round trip at every step.
        assert WatchState.from_json(json.loads(json.dumps(state.to_json()))) == state
    return out


SEQUENCES: list[tuple[str, list[Snapshot], list[tuple[str, ...] | None]]] = [
    (
        "quiet PR never wakes",
        [snap(), snap(), snap(checks="pending"), snap(checks="success")],
        [None, None, None, None],
    ),
    ("first poll is a baseline", [snap(H1, review_state="APPROVED")], [None]),
    (
        "head moved wakes once",
        [snap(H1), snap(H2), snap(H2), snap(H2)],
        [None, ("head_moved",), None, None],
    ),
    (
        "head moving back is a new move",
        [snap(H1), snap(H2), snap(H1)],
        [None, ("head_moved",), ("head_moved",)],
    ),
    (
        "red for 4 polls wakes once, on the 4th",
        [snap(checks="failure")] * 6,
        [None, None, None, ("checks_stalled",), None, None],
    ),
    (
        "pending breaks the red streak",
        [snap(checks="failure")] * 3 + [snap(checks="pending")] + [snap(checks="failure")] * 4,
        [None, None, None, None, None, None, None, ("checks_stalled",)],
    ),
    (
        "stall counter resets on a new head",
        [snap(H1, "failure")] * 3 + [snap(H2, "failure")] * 4,
        [None, None, None, ("head_moved",), None, None, ("checks_stalled",)],
    ),
    (
        "stalled wakes once per head even if it flaps",
        [snap(checks="failure")] * 4 + [snap(checks="success")] + [snap(checks="failure")] * 4,
        [None, None, None, ("checks_stalled",), None, None, None, None, None],
    ),
    (
        "owner review on the live head wakes once",
        [snap(), snap(review_state="CHANGES_REQUESTED"), snap(review_state="CHANGES_REQUESTED")],
        [None, ("review",), None],
    ),
    (
        "a new review by the owner wakes again",
        [
            snap(),
            snap(review_state="COMMENTED", review_id=1),
            snap(review_state="APPROVED", review_id=2),
        ],
        [None, ("review",), ("review",)],
    ),
    (
        "review on an old head is ignored",
        [snap(H2), snap(H2, review_state="APPROVED", review_head=H1)],
        [None, None],
    ),
    (
        "head moves away from a review and back: the review is not announced twice",
        [
            snap(H1),
            snap(H1, review_state="APPROVED"),
            snap(H2, review_state="APPROVED", review_head=H1),
            snap(H1, review_state="APPROVED"),
        ],
        [None, ("review",), ("head_moved",), ("head_moved",)],
    ),
    (
        "merge wakes once",
        [snap(), snap(state="merged"), snap(state="merged")],
        [None, ("merged",), None],
    ),
    (
        "close wakes once",
        [snap(), snap(state="closed"), snap(state="closed")],
        [None, ("closed",), None],
    ),
    ("already merged at the first poll wakes", [snap(state="merged")], [("merged",)]),
    (
        "reopened then closed again wakes again",
        [snap(), snap(state="closed"), snap(), snap(state="closed")],
        [None, ("closed",), None, ("closed",)],
    ),
    (
        "several events in one poll: one wake, most urgent first",
        [snap(H1), snap(H2, review_state="APPROVED", state="merged")],
        [None, ("merged", "head_moved", "review")],
    ),
    (
        "no stall wake on a closed PR",
        [snap(checks="failure", state="closed")] * 5,
        [("closed",), None, None, None, None],
    ),
]


@pytest.mark.parametrize(("name", "steps", "expected"), SEQUENCES, ids=[s[0] for s in SEQUENCES])
def test_advance_sequences(
    name: str, steps: list[Snapshot], expected: list[tuple[str, ...] | None]
) -> None:
    assert kinds_for(steps) == expected


@pytest.mark.parametrize(("n", "wake_at"), [(1, 0), (2, 1), (4, 3), (6, 5)])
def test_stall_polls_configurable(n: int, wake_at: int) -> None:
    got = kinds_for([snap(checks="failure")] * 7, stall_polls=n)
    assert got.index(("checks_stalled",)) == wake_at
    assert got.count(("checks_stalled",)) == 1


def test_stall_polls_must_be_positive() -> None:
    with pytest.raises(ValueError):
        advance(initial_state(), snap(), stall_polls=0)


def test_wake_carries_details() -> None:
    state, _ = advance(initial_state(), snap(H1))
    state, wake = advance(state, snap(H2, review_state="CHANGES_REQUESTED"))
    assert wake is not None and wake.kind == "head_moved"
    assert wake.previous_head == H1 and wake.review is not None
    assert wake.review.state == "CHANGES_REQUESTED"


# ---------------------------------------------------------------- frame_wake


def _wake(kinds: tuple[Any, ...], **kw: Any) -> Wake:
    base = Snapshot(repo="o/r", number=7, head_sha=H2, head_ref="feature", title="Fix parser")
    return Wake(kinds=kinds, snapshot=kw.pop("snapshot", base), **kw)


@pytest.mark.parametrize(
    ("wake", "must_contain"),
    [
        (
            _wake(("head_moved",), previous_head=H1),
            ["o/r#7", H1[:12], H2[:12], "feature", "rebase"],
        ),
        (
            _wake(("review",), review=Review(1, "alice", "CHANGES_REQUESTED", H2)),
            ["@alice", "requested changes", "address each point"],
        ),
        (
            _wake(("review",), review=Review(1, "alice", "APPROVED", H2)),
            ["approved", "do not merge"],
        ),
        (_wake(("review",), review=Review(1, "alice", "COMMENTED", H2)), ["review comments"]),
        (
            _wake(
                ("checks_stalled",),
                failing=(Check("lint", "failure"), Check("test", "failure")),
                red_polls=4,
            ),
            ["failing", "4 polls", "lint, test", "fix the cause"],
        ),
        (_wake(("merged",)), ["merged", "Stop"]),
        (_wake(("closed",)), ["closed without being merged"]),
    ],
)
def test_frame_wake(wake: Wake, must_contain: list[str]) -> None:
    text = frame_wake(wake)
    assert text.startswith("PR o/r#7 (Fix parser):")
    for fragment in must_contain:
        assert fragment in text
    assert len(text) < 600


def test_frame_wake_names_every_kind_in_one_text() -> None:
    text = frame_wake(_wake(("merged", "head_moved"), previous_head=H1))
    assert "merged" in text and "head moved" in text


# ---------------------------------------------------------------- retry

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def _quota_spent(reset_in_s: int) -> dict[str, str]:
    """GitHub's headers for a used-up rate limit that resets ``reset_in_s`` after NOW."""
    return {
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": str(int(NOW.timestamp()) + reset_in_s),
    }


@pytest.mark.parametrize(
    ("status", "headers", "refreshed", "action", "delay"),
    [
        (200, {}, False, "ok", 0.0),
        (304, {}, False, "ok", 0.0),
        (500, {}, False, "retry", 1.0),
        (502, {}, False, "retry", 1.0),
        (503, {"Retry-After": "7"}, False, "retry", 7.0),
        (408, {}, False, "retry", 1.0),
        (429, {}, False, "retry", 1.0),
        (429, {"Retry-After": "30"}, False, "retry", 30.0),
        (429, {"retry-after": "Wed, 01 Jan 2026 12:01:00 GMT"}, False, "retry", 60.0),
        (429, _quota_spent(reset_in_s=90), False, "retry", 90.0),
        (403, {}, False, "fail", 0.0),
        (403, _quota_spent(reset_in_s=5), False, "retry", 5.0),
        (404, {}, False, "fail", 0.0),
        (422, {}, False, "fail", 0.0),
        (401, {}, False, "refresh_token", 0.0),
        (401, {}, True, "fail", 0.0),
    ],
)
def test_classify_status(
    status: int, headers: dict[str, str], refreshed: bool, action: str, delay: float
) -> None:
    decision = classify_status(status, headers, token_refreshed=refreshed, now=NOW)
    assert decision.action == action
    assert decision.delay_s == pytest.approx(delay)
    assert decision.should_retry == (action in ("retry", "refresh_token"))


def test_retries_back_off_and_give_up() -> None:
    policy = RetryPolicy(max_attempts=4, base_delay_s=0.5, max_delay_s=3)
    delays = [classify_status(500, attempt=a, policy=policy).delay_s for a in range(3)]
    assert delays == [0.5, 1.0, 2.0]
    assert classify_status(500, attempt=3, policy=policy).action == "fail"
    assert backoff(10, policy) == 3


@pytest.mark.parametrize(
    ("exc", "action"),
    [
        (ConnectionRefusedError(), "retry"),
        (ConnectionResetError(), "retry"),
        (TimeoutError(), "retry"),
        (aiohttp.ServerDisconnectedError(), "retry"),
        (aiohttp.ClientConnectorError.__new__(aiohttp.ClientConnectorError), "retry"),
        (ValueError("bad json"), "fail"),
        (KeyError("x"), "fail"),
    ],
)
def test_classify_error(exc: BaseException, action: str) -> None:
    assert classify_error(exc).action == action


def test_classify_dispatches_on_status_or_exception() -> None:
    assert classify(503).action == "retry"
    assert classify(404).action == "fail"
    assert classify(401, token_refreshed=True).action == "fail"
    assert classify(ConnectionResetError()).action == "retry"
    assert classify(RuntimeError("bug")).action == "fail"


def test_server_delay_absent_and_past() -> None:
    assert server_delay({}, now=NOW) is None
    assert server_delay({"Retry-After": "Wed, 01 Jan 2025 00:00:00 GMT"}, now=NOW) == 0.0
    assert server_delay({"Retry-After": "soon"}, now=NOW) is None
