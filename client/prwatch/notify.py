"""When a watched PR deserves a model's attention: a pure state machine.

``advance(state, snapshot)`` compares one poll with what was already seen and
returns the next state plus at most one :class:`Wake`. It wakes once per
meaningful change and never twice for the same event:

- ``merged`` / ``closed``: the PR left the open state (also on the first poll,
  since a watcher started on a finished PR must learn that at once). A reopened
  PR re-arms these.
- ``head_moved``: the head commit differs from the previous poll's.
- ``review``: the owner's latest review on the live head is one not seen
  before (a review of an older head never counts; see ``snapshot``).
- ``checks_stalled``: the combined checks were red on the same head for
  ``stall_polls`` consecutive polls (default 4). At most once while the head
  stays the same: a flapping check does not page the model again, and a head
  move (even back to an earlier sha) restarts the count.

The first poll is a baseline: the head and any existing review are recorded,
not announced. Several events in one poll produce one wake carrying all their
kinds, most urgent first. The state is a frozen dataclass with a JSON form so a
registry can persist it between polls or processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from .snapshot import Check, PRState, Review, Snapshot

WakeKind = Literal["merged", "closed", "head_moved", "review", "checks_stalled"]

DEFAULT_STALL_POLLS = 4
# Review keys remembered so a review that comes back onto the live head (a
# force-push back to a reviewed commit) is not announced twice. Bounded so the
# persisted state cannot grow without limit.
_REVIEW_MEMORY = 50


@dataclass(frozen=True)
class WatchState:
    """Everything ``advance`` remembers between polls. ``head_sha`` is None
    until the first poll."""

    head_sha: str | None = None
    review_key: str | None = None
    seen_reviews: tuple[str, ...] = ()
    red_head: str | None = None
    red_polls: int = 0
    stall_woken_head: str | None = None
    terminal: PRState | None = None
    polls: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "head_sha": self.head_sha,
            "review_key": self.review_key,
            "seen_reviews": list(self.seen_reviews),
            "red_head": self.red_head,
            "red_polls": self.red_polls,
            "stall_woken_head": self.stall_woken_head,
            "terminal": self.terminal,
            "polls": self.polls,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WatchState:
        terminal = data.get("terminal")
        return cls(
            head_sha=data.get("head_sha"),
            review_key=data.get("review_key"),
            seen_reviews=tuple(str(k) for k in data.get("seen_reviews") or ()),
            red_head=data.get("red_head"),
            red_polls=int(data.get("red_polls") or 0),
            stall_woken_head=data.get("stall_woken_head"),
            terminal=cast(PRState, terminal) if terminal in ("closed", "merged") else None,
            polls=int(data.get("polls") or 0),
        )


@dataclass(frozen=True)
class Wake:
    """One notification: what changed (``kinds``, most urgent first) and the
    poll that showed it."""

    kinds: tuple[WakeKind, ...]
    snapshot: Snapshot
    previous_head: str | None = None
    review: Review | None = None
    failing: tuple[Check, ...] = ()
    red_polls: int = 0

    @property
    def kind(self) -> WakeKind:
        return self.kinds[0]


def initial_state() -> WatchState:
    """The state before any poll."""
    return WatchState()


def advance(
    state: WatchState, snap: Snapshot, *, stall_polls: int = DEFAULT_STALL_POLLS
) -> tuple[WatchState, Wake | None]:
    """Fold one poll into ``state``; return the new state and the wake, if any."""
    if stall_polls < 1:
        raise ValueError("stall_polls must be at least 1")
    first = state.head_sha is None
    kinds: list[WakeKind] = []

    terminal: PRState | None = snap.state if snap.state != "open" else None
    if terminal is not None and terminal != state.terminal:
        kinds.append("merged" if terminal == "merged" else "closed")

    head_moved = not first and snap.head_sha != state.head_sha
    if head_moved:
        kinds.append("head_moved")

    review_key = snap.review.key if snap.review is not None else None
    seen = state.seen_reviews
    new_review = review_key is not None and review_key not in seen
    if new_review and review_key is not None:
        seen = (*seen, review_key)[-_REVIEW_MEMORY:]
        if not first:
            kinds.append("review")

    if snap.combined == "failure":
        red_polls = state.red_polls + 1 if state.red_head == snap.head_sha else 1
        red_head: str | None = snap.head_sha
    else:
        red_polls, red_head = 0, None
    # A head move starts a new stretch: even a return to an earlier sha may
    # stall (and wake) again.
    stall_woken_head = None if head_moved else state.stall_woken_head
    if terminal is None and red_polls >= stall_polls and stall_woken_head != snap.head_sha:
        kinds.append("checks_stalled")
        stall_woken_head = snap.head_sha

    new_state = replace(
        state,
        head_sha=snap.head_sha,
        review_key=review_key,
        seen_reviews=seen,
        red_head=red_head,
        red_polls=red_polls,
        stall_woken_head=stall_woken_head,
        terminal=terminal,
        polls=state.polls + 1,
    )
    if not kinds:
        return new_state, None
    wake = Wake(
        kinds=tuple(kinds),
        snapshot=snap,
        previous_head=state.head_sha if head_moved else None,
        review=snap.review if "review" in kinds else None,
        failing=snap.failing_checks if "checks_stalled" in kinds else (),
        red_polls=red_polls,
    )
    return new_state, wake
