"""The local GitHub itself: what other tests (signed commits, PR watch) rely on."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import aiohttp

from tests.fakes.github import FakeGitHub
from tests.fakes.programs import run_program

REPO = "acme/widgets"


async def _api(
    gh: FakeGitHub, method: str, path: str, token: str, body: Any = None
) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.request(
            method,
            gh.api_url + path,
            json=body,
            headers={"Authorization": f"token {token}"},
            ssl=gh.ca.client_context(),
        ) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


async def _gql(gh: FakeGitHub, token: str, query: str, variables: dict[str, Any]) -> Any:
    status, data = await _api(
        gh, "POST", "/graphql", token, {"query": query, "variables": variables}
    )
    assert status == 200
    return data


COMMIT = """mutation($input: CreateCommitOnBranchInput!) {
  createCommitOnBranch(input: $input) { commit { oid url } }
}"""
REF = """query($owner: String!, $name: String!, $ref: String!) {
  repository(owner: $owner, name: $name) {
    ref(qualifiedName: $ref) { target { oid } }
    defaultBranchRef { name target { oid } }
  }
}"""


async def test_create_commit_on_branch_writes_a_verified_commit(fake_github: FakeGitHub) -> None:
    token = fake_github.issue_token([REPO])
    data = await _gql(
        fake_github, token, REF, {"owner": "acme", "name": "widgets", "ref": "refs/heads/main"}
    )
    head = data["data"]["repository"]["ref"]["target"]["oid"]
    assert data["data"]["repository"]["defaultBranchRef"]["name"] == "main"
    assert head == await fake_github.head_sha(REPO, "main")
    new_ref = {"ref": "refs/heads/feat", "sha": head}
    status, _ = await _api(fake_github, "POST", f"/repos/{REPO}/git/refs", token, new_ref)
    assert status == 201
    status, again = await _api(fake_github, "POST", f"/repos/{REPO}/git/refs", token, new_ref)
    assert status == 422 and "already exists" in again["message"]
    inp = {
        "branch": {"repositoryNameWithOwner": REPO, "branchName": "feat"},
        "message": {"headline": "Add a file", "body": "Because."},
        "fileChanges": {
            "additions": [{"path": "src/a.txt", "contents": base64.b64encode(b"hello\n").decode()}],
            "deletions": [{"path": "README.md"}],
        },
        "expectedHeadOid": head,
    }
    data = await _gql(fake_github, token, COMMIT, {"input": inp})
    oid = data["data"]["createCommitOnBranch"]["commit"]["oid"]
    assert await fake_github.head_sha(REPO, "feat") == oid
    assert await fake_github.git(REPO, "show", f"{oid}:src/a.txt") == "hello\n"
    tree = await fake_github.git(REPO, "ls-tree", "--name-only", oid)
    assert "README.md" not in tree.split()
    status, commit = await _api(fake_github, "GET", f"/repos/{REPO}/commits/{oid}", token)
    assert status == 200
    assert commit["commit"]["verification"]["verified"] is True
    assert commit["parents"] == [{"sha": head}]
    assert commit["commit"]["message"] == "Add a file\n\nBecause."
    # A stale expectedHeadOid is refused with GitHub's error shape and moves nothing.
    stale = await _gql(fake_github, token, COMMIT, {"input": inp})
    assert stale["errors"][0]["type"] == "STALE_DATA"
    assert "Expected branch to point to" in stale["errors"][0]["message"]
    assert await fake_github.head_sha(REPO, "feat") == oid


async def test_repository_scope_and_bad_credentials(fake_github: FakeGitHub) -> None:
    await fake_github.create_repo("acme/other")
    token = fake_github.issue_token(["acme/other"])
    status, _ = await _api(fake_github, "GET", f"/repos/{REPO}", token)
    assert status == 404
    status, body = await _api(fake_github, "GET", f"/repos/{REPO}", "ghs_not-a-token")
    assert status == 401 and body["message"] == "Bad credentials"
    fake_github.expire_token(token)
    status, _ = await _api(fake_github, "GET", "/repos/acme/other", token)
    assert status == 401


async def test_pulls_checks_statuses_reviews(fake_github: FakeGitHub) -> None:
    token = fake_github.issue_token([REPO])
    await fake_github.git(REPO, "branch", "topic", "main")
    status, pull = await _api(
        fake_github,
        "POST",
        f"/repos/{REPO}/pulls",
        token,
        {"title": "T", "head": "topic", "base": "main", "body": "B"},
    )
    assert status == 201 and pull["number"] == 1
    sha = pull["head"]["sha"]
    fake_github.add_check_run(REPO, sha, "ci", status="completed", conclusion="failure")
    fake_github.add_status(REPO, sha, "lint", "success")
    fake_github.add_review(REPO, 1, "owner", "APPROVED", commit_id=sha)
    fake_github.set_pull(REPO, 1, mergeable=False, mergeable_state="dirty")
    _, runs = await _api(fake_github, "GET", f"/repos/{REPO}/commits/{sha}/check-runs", token)
    assert runs["check_runs"][0]["conclusion"] == "failure"
    _, combined = await _api(fake_github, "GET", f"/repos/{REPO}/commits/topic/status", token)
    assert combined["state"] == "success" and combined["sha"] == sha
    _, reviews = await _api(fake_github, "GET", f"/repos/{REPO}/pulls/1/reviews", token)
    assert reviews[0]["state"] == "APPROVED"
    _, got = await _api(fake_github, "GET", f"/repos/{REPO}/pulls/1", token)
    assert got["mergeable"] is False and got["mergeable_state"] == "dirty"
    fake_github.fail_next(f"/repos/{REPO}/pulls/1", 503)
    status, _ = await _api(fake_github, "GET", f"/repos/{REPO}/pulls/1", token)
    assert status == 503
    status, _ = await _api(fake_github, "GET", f"/repos/{REPO}/pulls/1", token)
    assert status == 200


async def _git(*args: str, cwd: Path | None = None, env: dict[str, str]) -> tuple[int, str]:
    code, out, _ = await run_program("git", *args, cwd=cwd, env=env, merge_stderr=True)
    return code, out


async def test_git_smart_http_needs_the_repository_token(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    await fake_github.create_repo("acme/other")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "GIT_SSL_CAINFO": str(fake_github.ca_path),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    base = f"127.0.0.1:{fake_github.git_port}/{REPO}.git"
    good = fake_github.issue_token([REPO])
    wrong_repo = fake_github.issue_token(["acme/other"])
    rc, out = await _git("ls-remote", f"https://x-access-token:{wrong_repo}@{base}", env=env)
    assert rc != 0 and "Authentication failed" in out
    rc, out = await _git("ls-remote", f"https://someone:{good}@{base}", env=env)
    assert rc != 0
    rc, _ = await _git(
        "clone", "-q", f"https://x-access-token:{good}@{base}", str(tmp_path / "wc"), env=env
    )
    assert rc == 0
    wc = tmp_path / "wc"
    (wc / "new.txt").write_text("new\n")
    await _git("add", "new.txt", cwd=wc, env=env)
    rc, out = await _git(
        "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "new", cwd=wc, env=env
    )
    assert rc == 0, out
    rc, out = await _git("push", "origin", "HEAD:refs/heads/pushed", cwd=wc, env=env)
    assert rc == 0, out
    _, local = await _git("rev-parse", "HEAD", cwd=wc, env=env)
    assert await fake_github.head_sha(REPO, "pushed") == local.strip()
