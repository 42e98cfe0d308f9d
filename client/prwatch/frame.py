"""Turn a :class:`Wake` into the few sentences a model is woken with.

The text says what changed and what to do next, in that order, and names no
tool: the orchestrator decides which tools the model has (see
:mod:`airlock.client.guidance`), so the wake text must read correctly in every
mode.
"""

from __future__ import annotations

from .notify import Wake, WakeKind
from .snapshot import Snapshot

_MAX_LISTED_CHECKS = 5


def _short(sha: str | None) -> str:
    return (sha or "?")[:12]


def _pr_name(snap: Snapshot) -> str:
    name = f"{snap.repo}#{snap.number}" if snap.repo else f"#{snap.number}"
    return f"PR {name}" + (f" ({snap.title})" if snap.title else "")


def _review_sentence(wake: Wake) -> str:
    review = wake.review
    if review is None:
        return ""
    who = f"@{review.user}"
    on = f"on the current head {_short(review.commit_id)}"
    if review.state == "APPROVED":
        return (
            f"{who} approved it {on}. Change nothing unless the review comments ask for it, "
            "and do not merge unless you were asked to."
        )
    if review.state == "CHANGES_REQUESTED":
        return (
            f"{who} requested changes {on}. Read the review and every inline comment, "
            "address each point, push, and say what you changed."
        )
    if review.state == "DISMISSED":
        return f"{who}'s review {on} was dismissed. Check whether anything is still asked of you."
    return (
        f"{who} left review comments {on}. Read them and address or answer each one before "
        "continuing."
    )


def _stall_sentence(wake: Wake) -> str:
    snap = wake.snapshot
    names = [c.name for c in wake.failing][:_MAX_LISTED_CHECKS]
    more = len(wake.failing) - len(names)
    listed = ", ".join(names) + (f" and {more} more" if more > 0 else "")
    which = f" ({listed})" if listed else ""
    return (
        f"Checks have been failing on head {_short(snap.head_sha)} for {wake.red_polls} "
        f"polls{which}. Read the failing checks' logs, fix the cause, and push; do not "
        "re-run them hoping they pass."
    )


def _sentence(kind: WakeKind, wake: Wake) -> str:
    snap = wake.snapshot
    if kind == "merged":
        return "It was merged. Stop working on it; there is nothing more to push."
    if kind == "closed":
        return (
            "It was closed without being merged. Stop working on it and report; "
            "do not reopen it unless asked."
        )
    if kind == "head_moved":
        branch = f" {snap.head_ref}" if snap.head_ref else ""
        return (
            f"Its head moved from {_short(wake.previous_head)} to {_short(snap.head_sha)}: "
            f"someone pushed to the branch{branch}. Fetch it and rebase your work onto the "
            "new head before changing anything; your local copy is stale."
        )
    if kind == "review":
        return _review_sentence(wake)
    return _stall_sentence(wake)


def frame_wake(wake: Wake) -> str:
    """A short text for a model: which PR, what changed, what to do."""
    sentences = [f"{_pr_name(wake.snapshot)}:"]
    sentences.extend(s for s in (_sentence(k, wake) for k in wake.kinds) if s)
    return " ".join(sentences)
