"""Property tests of ``advance``: over random poll sequences, each event wakes
exactly as often as it happens, and never twice."""

from __future__ import annotations

import itertools
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from airlock.client.prwatch import advance, initial_state
from airlock.client.prwatch.snapshot import Review, Snapshot

HEADS = ["1" * 40, "2" * 40, "3" * 40]

polls = st.lists(
    st.tuples(
        st.sampled_from(HEADS),
        st.sampled_from(["none", "pending", "success", "failure"]),
        st.sampled_from([None, 1, 2]),  # owner review id (on the live head) or none
        st.sampled_from(["open", "open", "open", "closed", "merged"]),
    ),
    min_size=1,
    max_size=40,
)


def make(head: str, combined: str, review: int | None, state: str) -> Snapshot:
    return Snapshot(
        repo="o/r",
        number=1,
        head_sha=head,
        state=state,  # type: ignore[arg-type]
        combined=combined,  # type: ignore[arg-type]
        review=Review(review, "alice", "APPROVED", head) if review is not None else None,
    )


@settings(max_examples=300, deadline=None)
@given(polls, st.integers(min_value=1, max_value=5))
def test_wakes_match_events(seq: list[tuple[str, str, int | None, str]], n: int) -> None:
    state = initial_state()
    kinds: Counter[str] = Counter()
    stall_at: list[int] = []
    for index, poll in enumerate(seq):
        state, wake = advance(state, make(*poll), stall_polls=n)
        if wake is not None:
            assert len(set(wake.kinds)) == len(wake.kinds)
            kinds.update(wake.kinds)
            if "checks_stalled" in wake.kinds:
                stall_at.append(index)
    heads = [p[0] for p in seq]
    assert kinds["head_moved"] == sum(1 for a, b in itertools.pairwise(heads) if a != b)
    states = ["open", *[p[3] for p in seq]]
    for terminal in ("merged", "closed"):
        expected = sum(1 for a, b in itertools.pairwise(states) if b == terminal and a != terminal)
        assert kinds[terminal] == expected
    # Each owner review id is announced at most once, never on the first poll.
    assert kinds["review"] <= 2
    # Stalls: exactly one per stretch of polls on one head that has an open poll
    # at the end of >= n consecutive red polls; at its first such poll.
    expected_stalls: list[int] = []
    run = 0
    woken = False
    for index, (head, combined, _, pr_state) in enumerate(seq):
        if index and head != seq[index - 1][0]:
            run, woken = 0, False
        run = run + 1 if combined == "failure" else 0
        if run >= n and pr_state == "open" and not woken:
            expected_stalls.append(index)
            woken = True
    assert stall_at == expected_stalls
