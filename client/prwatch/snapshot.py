"""A pull request reduced to the few facts a watcher wakes on.

GitHub spreads a PR's state over four REST resources (the pull, its head's
check runs, its head's combined commit status, its reviews). ``snapshot``
folds them into one immutable, comparable value so the notification logic in
:mod:`airlock.client.prwatch.notify` can stay a pure function of two values.
Everything here is pure: raw GitHub JSON in, a frozen dataclass out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

CheckState = Literal["pending", "success", "failure", "neutral"]
CombinedState = Literal["none", "pending", "success", "failure"]
PRState = Literal["open", "closed", "merged"]

# Check-run conclusions that mean "this check is red". ``action_required``
# counts: the run cannot pass without someone acting on it.
_FAILING_CONCLUSIONS = frozenset(
    {"failure", "timed_out", "cancelled", "action_required", "startup_failure", "stale"}
)
_PASSING_CONCLUSIONS = frozenset({"success"})
_NEUTRAL_CONCLUSIONS = frozenset({"neutral", "skipped"})
# Commit-status states (the older statuses API): ``error`` is as red as ``failure``.
_STATUS_STATES: dict[str, CheckState] = {
    "success": "success",
    "failure": "failure",
    "error": "failure",
    "pending": "pending",
}


@dataclass(frozen=True)
class Check:
    """One check run or commit-status context on the head commit."""

    name: str
    state: CheckState
    source: Literal["check_run", "status"] = "check_run"
    url: str | None = None


@dataclass(frozen=True)
class Review:
    """A submitted review. ``key`` identifies it across polls."""

    id: int
    user: str
    state: str
    commit_id: str
    submitted_at: str | None = None

    @property
    def key(self) -> str:
        return f"{self.id}:{self.state}"


@dataclass(frozen=True)
class Snapshot:
    """What a PR looked like at one poll.

    ``review`` is the owner's latest submitted review, and only when it was made
    on the live head: a review of an older head says nothing about the code now
    on the branch, so it is dropped here rather than in every consumer.
    """

    repo: str
    number: int
    head_sha: str
    head_ref: str = ""
    state: PRState = "open"
    draft: bool = False
    mergeable: bool | None = None
    mergeable_state: str | None = None
    checks: tuple[Check, ...] = ()
    combined: CombinedState = "none"
    review: Review | None = None
    owner: str | None = None
    title: str = ""
    url: str | None = None

    @property
    def failing_checks(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.state == "failure")

    @property
    def closed(self) -> bool:
        return self.state != "open"

    @property
    def merged(self) -> bool:
        return self.state == "merged"


def _get(mapping: Mapping[str, Any], *path: str) -> Any:
    current: Any = mapping
    for part in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(part)
    return current


def _check_run_state(run: Mapping[str, Any]) -> CheckState:
    if run.get("status") != "completed":
        return "pending"
    conclusion = str(run.get("conclusion") or "")
    if conclusion in _FAILING_CONCLUSIONS:
        return "failure"
    if conclusion in _PASSING_CONCLUSIONS:
        return "success"
    if conclusion in _NEUTRAL_CONCLUSIONS:
        return "neutral"
    # A completed run with an unknown conclusion is not green; treat it as red
    # rather than let a new GitHub value pass silently.
    return "failure"


def _runs_list(check_runs: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None) -> list[Any]:
    if check_runs is None:
        return []
    if isinstance(check_runs, Mapping):
        # The REST answer itself: {"total_count": n, "check_runs": [...]}
        return list(check_runs.get("check_runs") or [])
    return list(check_runs)


def _checks_from_runs(
    check_runs: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None, head_sha: str
) -> list[Check]:
    """One entry per check name: a re-run supersedes the earlier run of that name."""
    latest: dict[str, Mapping[str, Any]] = {}
    for run in _runs_list(check_runs):
        if not isinstance(run, Mapping):
            continue
        sha = run.get("head_sha")
        if sha and head_sha and sha != head_sha:
            continue
        name = str(run.get("name") or run.get("id") or "")
        previous = latest.get(name)
        if previous is None or _run_order(run) >= _run_order(previous):
            latest[name] = run
    return [
        Check(
            name=name,
            state=_check_run_state(run),
            source="check_run",
            url=run.get("html_url") or run.get("details_url"),
        )
        for name, run in latest.items()
    ]


def _run_order(run: Mapping[str, Any]) -> tuple[str, int]:
    raw_id = run.get("id")
    return (str(run.get("started_at") or ""), raw_id if isinstance(raw_id, int) else 0)


def _checks_from_status(status: Mapping[str, Any] | None) -> list[Check]:
    if not status:
        return []
    checks: list[Check] = []
    for item in status.get("statuses") or []:
        if not isinstance(item, Mapping):
            continue
        checks.append(
            Check(
                name=str(item.get("context") or ""),
                state=_STATUS_STATES.get(str(item.get("state")), "pending"),
                source="status",
                url=item.get("target_url"),
            )
        )
    return checks


def combine(checks: Sequence[Check]) -> CombinedState:
    """Red if anything is red, else pending if anything runs, else green.

    ``none`` (no checks at all) is kept apart from ``success`` so a consumer can
    tell "all green" from "nothing ran".
    """
    if not checks:
        return "none"
    states = {c.state for c in checks}
    if "failure" in states:
        return "failure"
    if "pending" in states:
        return "pending"
    return "success"


def owner_review(
    reviews: Sequence[Mapping[str, Any]] | None, owner: str | None, head_sha: str
) -> Review | None:
    """The owner's latest submitted review if it was made on ``head_sha``."""
    if not owner or not reviews:
        return None
    mine: list[Review] = []
    for raw in reviews:
        if not isinstance(raw, Mapping):
            continue
        login = str(_get(raw, "user", "login") or "")
        state = str(raw.get("state") or "").upper()
        if login.lower() != owner.lower() or state in ("", "PENDING"):
            continue
        raw_id = raw.get("id")
        mine.append(
            Review(
                id=raw_id if isinstance(raw_id, int) else 0,
                user=login,
                state=state,
                commit_id=str(raw.get("commit_id") or ""),
                submitted_at=raw.get("submitted_at"),
            )
        )
    if not mine:
        return None
    # GitHub lists reviews chronologically; sort anyway (ISO timestamps sort as
    # text; ids break ties and cover a missing timestamp).
    latest = max(
        enumerate(mine), key=lambda pair: (pair[1].submitted_at or "", pair[1].id, pair[0])
    )[1]
    return latest if latest.commit_id == head_sha else None


def _pr_state(pr: Mapping[str, Any]) -> PRState:
    if pr.get("merged") or pr.get("merged_at"):
        return "merged"
    return "closed" if str(pr.get("state") or "open").lower() == "closed" else "open"


def snapshot(
    pr: Mapping[str, Any],
    *,
    check_runs: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    reviews: Sequence[Mapping[str, Any]] | None = None,
    owner: str | None = None,
) -> Snapshot:
    """Fold a PR's REST resources into a :class:`Snapshot`.

    ``pr`` is ``GET /repos/{o}/{r}/pulls/{n}``; ``check_runs`` the head's
    ``check-runs`` answer (or its list), ``status`` the head's combined
    ``status``, ``reviews`` the PR's reviews. Any of those three may instead be
    carried inside ``pr`` under the same keys, so a caller holding one bundled
    dict can pass just that. ``owner`` is the login whose reviews count (the
    human the agent works for); by default the PR author.
    """
    if check_runs is None:
        check_runs = pr.get("check_runs")
    if status is None:
        status = pr.get("status") if isinstance(pr.get("status"), Mapping) else None
    if reviews is None:
        reviews = pr.get("reviews")
    owner = owner or _get(pr, "user", "login")
    head_sha = str(_get(pr, "head", "sha") or "")
    checks = tuple(
        sorted(
            _checks_from_runs(check_runs, head_sha) + _checks_from_status(status),
            key=lambda c: (c.name, c.source),
        )
    )
    repo = str(_get(pr, "base", "repo", "full_name") or pr.get("repo") or "")
    number = pr.get("number")
    mergeable = pr.get("mergeable")
    return Snapshot(
        repo=repo,
        number=number if isinstance(number, int) else 0,
        head_sha=head_sha,
        head_ref=str(_get(pr, "head", "ref") or ""),
        state=_pr_state(pr),
        draft=bool(pr.get("draft")),
        mergeable=mergeable if isinstance(mergeable, bool) else None,
        mergeable_state=pr.get("mergeable_state"),
        checks=checks,
        combined=combine(checks),
        review=owner_review(reviews, owner, head_sha),
        owner=owner,
        title=str(pr.get("title") or ""),
        url=pr.get("html_url"),
    )
