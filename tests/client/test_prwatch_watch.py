"""``watch`` and ``GitHubReader`` against the local GitHub (tests/fakes/github.py):
a test pushes a new head, flips a check, reviews, merges; the loop wakes once
for each; retries, token refresh and refusals go through real HTTP."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from airlock.client.providers import GitHubAppProvider, StaticTokenProvider
from airlock.client.prwatch import (
    GitHubReader,
    PRWatchError,
    RetryPolicy,
    Wake,
    WatchState,
    frame_wake,
    watch,
)
from tests.fakes.clock import FakeSleep
from tests.fakes.github import FakeGitHub

REPO = "acme/widgets"
OWNER = "alice"


@pytest.fixture
async def gh(tmp_path: Path) -> AsyncIterator[FakeGitHub]:
    async with FakeGitHub(tmp_path / "gh", org="acme") as fake:
        await fake.create_repo(REPO)
        await push(fake, "feature", "first", base="main")
        yield fake


async def push(gh: FakeGitHub, branch: str, message: str, *, base: str | None = None) -> str:
    """A new commit on ``branch`` in the bare repository, as a push would make."""
    parent = await gh.head_sha(REPO, base or branch)
    assert parent is not None
    oid = (
        await gh.git(REPO, "commit-tree", f"{parent}^{{tree}}", "-p", parent, "-m", message)
    ).strip()
    await gh.git(REPO, "update-ref", f"refs/heads/{branch}", oid)
    return oid


def app_provider(gh: FakeGitHub) -> GitHubAppProvider:
    return GitHubAppProvider(
        gh.app_id,
        gh.app_private_key_pem,
        org="acme",
        api_url=gh.api_url,
        ssl_context=ssl.create_default_context(cafile=str(gh.ca_path)),
    )


def _static_reader(gh: FakeGitHub, sleep: FakeSleep, **options: Any) -> GitHubReader:
    """A reader of ``REPO`` with a fresh static token, pausing through ``sleep``."""
    token = StaticTokenProvider(gh.issue_token([REPO]))
    return GitHubReader(
        REPO, token, api_url=gh.api_url, ssl_context=ssl_ctx(gh), sleep=sleep, **options
    )


def ssl_ctx(gh: FakeGitHub) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(gh.ca_path))


async def test_watch_wakes_once_per_change_until_merged(gh: FakeGitHub) -> None:
    number = gh.add_pull_sync(REPO, title="Add feature", head="feature")
    head1 = await gh.head_sha(REPO, "feature")
    assert head1 is not None
    new_head: list[str] = []
    green: list[dict[str, Any]] = []

    async def push_new_head() -> None:
        new_head.append(await push(gh, "feature", "second"))
        green.append(gh.add_check_run(REPO, new_head[0], "ci", conclusion="success"))

    async def red_check() -> None:
        # Flip the green check run to red (same run, new conclusion).
        gh.set_check_runs(REPO, new_head[0], [green[0] | {"conclusion": "failure"}])

    async def review_on_old_head() -> None:
        gh.add_review(REPO, number, OWNER, "APPROVED", commit_id=head1)

    async def review_on_live_head() -> None:
        gh.add_review(REPO, number, OWNER, "CHANGES_REQUESTED", commit_id=new_head[0])

    async def merge() -> None:
        gh.set_pull(REPO, number, state="closed", merged=True)

    async def nothing() -> None:
        return None

    # One action between consecutive polls: poll 1 is the baseline.
    script: list[Callable[[], Awaitable[None]]] = [
        push_new_head,  # poll 2: head moved
        red_check,  # poll 3: red 1
        review_on_old_head,  # poll 4: red 2 (old-head review ignored)
        nothing,  # poll 5: red 3
        nothing,  # poll 6: red 4 -> stalled
        nothing,  # poll 7: red 5, nothing new
        review_on_live_head,  # poll 8: review
        merge,  # poll 9: merged, loop ends
        nothing,
    ]
    scripted = FakeSleep(script)

    states: list[WatchState] = []
    wakes: list[Wake] = []
    async for wake in watch(
        REPO,
        number,
        provider=app_provider(gh),
        owner=OWNER,
        api_url=gh.api_url,
        ssl_context=ssl_ctx(gh),
        interval_s=7,
        on_state=states.append,
        sleep=scripted,
        max_polls=20,
    ):
        wakes.append(wake)

    assert [w.kinds for w in wakes] == [
        ("head_moved",),
        ("checks_stalled",),
        ("review",),
        ("merged",),
    ]
    assert wakes[0].previous_head == head1 and wakes[0].snapshot.head_sha == new_head[0]
    assert [c.name for c in wakes[1].failing] == ["ci"] and wakes[1].red_polls == 4
    assert wakes[2].review is not None and wakes[2].review.state == "CHANGES_REQUESTED"
    assert len(states) == 9 and states[-1].terminal == "merged"
    assert scripted.pauses == [7] * 8
    text = frame_wake(wakes[1])
    assert "acme/widgets#1" in text and "ci" in text
    # One installation token served the whole watch, scoped to the one repository.
    assert len(gh.mints) == 1 and gh.mints[0].repositories == (REPO,)


async def test_watch_resumes_from_saved_state_without_repeating(gh: FakeGitHub) -> None:
    number = gh.add_pull_sync(REPO, title="Add feature", head="feature")
    provider = StaticTokenProvider(gh.issue_token([REPO]))
    saved: list[WatchState] = []

    async def run(**options: Any) -> list[Wake]:
        wakes = watch(
            REPO, number, provider=provider, api_url=gh.api_url, ssl_context=ssl_ctx(gh),
            sleep=FakeSleep(), **options,
        )  # fmt: skip
        return [w async for w in wakes]

    first = await run(on_state=saved.append, max_polls=2)
    await push(gh, "feature", "after restart")
    second = await run(state=saved[-1], max_polls=3)
    assert first == []
    assert [w.kinds for w in second] == [("head_moved",)]


async def test_reader_retries_5xx_and_429_then_succeeds(gh: FakeGitHub) -> None:
    number = gh.add_pull_sync(REPO, title="t", head="feature")
    gh.fail_next(f"/repos/{REPO}/pulls/{number}", 502, count=1)
    gh.fail_next(f"/repos/{REPO}/commits/", 429, count=1)
    record = FakeSleep()
    async with _static_reader(gh, record, policy=RetryPolicy(base_delay_s=0.25)) as reader:
        snap = await reader.snapshot(number)
    assert snap.head_sha == await gh.head_sha(REPO, "feature")
    assert record.pauses == [0.25, 0.25]


async def test_reader_refreshes_an_expired_token_once(gh: FakeGitHub) -> None:
    number = gh.add_pull_sync(REPO, title="t", head="feature")
    provider = app_provider(gh)
    async with GitHubReader(REPO, provider, api_url=gh.api_url, ssl_context=ssl_ctx(gh)) as reader:
        await reader.snapshot(number)
        assert len(gh.mints) == 1
        gh.expire_token(gh.mints[0].token)
        snap = await reader.snapshot(number)
    assert snap.number == number
    assert len(gh.mints) == 2
    statuses = [r.status for r in gh.requests if r.path == f"/repos/{REPO}/pulls/{number}"]
    assert statuses == [200, 401, 200]


async def test_reader_gives_up_on_a_second_401(gh: FakeGitHub) -> None:
    number = gh.add_pull_sync(REPO, title="t", head="feature")
    # A static token cannot be refreshed: the retry presents it again and fails.
    token = gh.issue_token([REPO])
    gh.expire_token(token)
    async with GitHubReader(
        REPO, StaticTokenProvider(token), api_url=gh.api_url, ssl_context=ssl_ctx(gh)
    ) as reader:
        with pytest.raises(PRWatchError, match="401 again") as info:
            await reader.snapshot(number)
    assert info.value.status == 401


@pytest.mark.parametrize("status", [403, 404])
async def test_reader_does_not_retry_403_or_404(gh: FakeGitHub, status: int) -> None:
    number = gh.add_pull_sync(REPO, title="t", head="feature")
    gh.fail_next(f"/repos/{REPO}/pulls/{number}", status, count=5)
    record = FakeSleep()
    async with _static_reader(gh, record) as reader:
        with pytest.raises(PRWatchError) as info:
            await reader.snapshot(number)
    assert info.value.status == status
    assert record.pauses == []
    assert sum(1 for r in gh.requests if r.path == f"/repos/{REPO}/pulls/{number}") == 1


async def test_reader_gives_up_after_max_attempts(gh: FakeGitHub) -> None:
    number = gh.add_pull_sync(REPO, title="t", head="feature")
    gh.fail_next(f"/repos/{REPO}/pulls/{number}", 503, count=10)

    async with _static_reader(gh, FakeSleep(), policy=RetryPolicy(max_attempts=3)) as reader:
        with pytest.raises(PRWatchError, match="gave up after 3 attempts"):
            await reader.snapshot(number)
    assert sum(1 for r in gh.requests if r.path == f"/repos/{REPO}/pulls/{number}") == 3
