"""Lease scopes against real git through a real airlock-proxy to a real ``git http-backend``.

The stand-in for github.com is tests/fakes/github.py (bare repositories served
by ``git http-backend`` over TLS). The sandbox's git only ever holds a
placeholder; the lease allows fetch and push for one repository and pushes
to ``refs/heads/agent/*`` only. Refused pushes must leave the bare
repository's refs byte-identical, and nothing must be swapped for them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airlock.client.leases import git_basic_rule, github_placeholder
from airlock.proxy.protocol import Allow, GitAllow
from tests.fakes.github_proxy import GitHubBehindProxy, github_behind_proxy
from tests.fakes.run import run_combined

pytestmark = pytest.mark.asyncio
REPO = "acme/widgets"
OTHER = "acme/other"
CHUNKED = ("-c", "http.postBuffer=65536", "-c", "http.version=HTTP/1.1")


async def git(env: dict[str, str], cwd: Path, *args: str) -> tuple[int, str]:
    return await run_combined(["git", *args], env=env, cwd=cwd)


def refs_snapshot(bare: Path) -> dict[str, bytes]:
    """Every byte that names a ref: loose refs, packed-refs, HEAD."""
    out: dict[str, bytes] = {}
    for path in sorted([bare / "HEAD", bare / "packed-refs", *(bare / "refs").rglob("*")]):
        if path.is_file():
            out[str(path.relative_to(bare))] = path.read_bytes()
    return out


def audit_refusals(w: GitHubBehindProxy) -> list[dict[str, object]]:
    return [
        e
        for e in w.proxy.audit_events()
        if e.get("event") == "refusal" and e.get("reason") == "lease_scope"
    ]


async def test_push_policy_through_real_git(tmp_path: Path) -> None:
    async with github_behind_proxy(tmp_path, repos={REPO: None, OTHER: None}) as w:
        token = w.gh.issue_token([REPO, OTHER])  # the real token could reach both
        placeholder = github_placeholder()
        rule = git_basic_rule(
            token,
            placeholder,
            allow=Allow(git=GitAllow(repos=[REPO], push_refs=["refs/heads/agent/*"])),
        )
        await w.pc.put_lease(w.session.session_id, "l1", [rule], ttl_s=600)
        env = w.env(GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@x", GIT_COMMITTER_NAME="a")
        env["GIT_COMMITTER_EMAIL"] = "a@x"
        url = f"https://x-access-token:{placeholder}@github.com/{REPO}.git"
        work = tmp_path / "work"
        rc, out = await git(env, tmp_path, "clone", "-q", url, str(work))
        assert rc == 0, out
        (work / "f.txt").write_text("agent work\n")
        await git(env, work, "checkout", "-q", "-b", "agent/fix")
        await git(env, work, "add", "f.txt")
        await git(env, work, "commit", "-q", "-m", "agent work")
        _, head = await git(env, work, "rev-parse", "HEAD")

        # Allowed: the agent's branch lands.
        rc, out = await git(env, work, "push", "-q", "origin", "agent/fix")
        assert rc == 0, out
        assert await w.gh.head_sha(REPO, "agent/fix") == head.strip()
        assert token not in out

        # A pack larger than git's post buffer goes chunked: the command list is
        # held and judged while the rest streams (airlock.proxy.mitm's body gate).
        # HTTP/1.1 towards the proxy, as the contract has it for intercepted
        # tunnels (an HTTP/2 request without a length is relayed without one).
        (work / "big.bin").write_bytes(os.urandom(400_000))
        await git(env, work, "add", "big.bin")
        await git(env, work, "commit", "-q", "-m", "big")
        _, big_head = await git(env, work, "rev-parse", "HEAD")
        rc, out = await git(env, work, *CHUNKED, "push", "origin", "agent/fix")
        assert rc == 0, out
        assert await w.gh.head_sha(REPO, "agent/fix") == big_head.strip()

        bare = w.gh.repo_path(REPO)
        await w.gh.git(REPO, "config", "receive.advertisePushOptions", "true")
        before = refs_snapshot(bare)

        # Refused: main, a deletion, a push option; nothing changes upstream.
        for args, needle in [
            (("push", "origin", "HEAD:refs/heads/main"), "refs/heads/main"),
            ((*CHUNKED, "push", "origin", "HEAD:refs/heads/main"), "refs/heads/main"),
            (("push", "origin", "--delete", "agent/fix"), "deleting refs/heads/agent/fix"),
            (("push", "-o", "ci.skip", "origin", "HEAD:refs/heads/agent/other"), "push options"),
        ]:
            rc, out = await git(env, work, *args)
            assert rc != 0, (args, out)
            assert "403" in out, out
            assert token not in out
            assert refs_snapshot(bare) == before, args
            w.proxy.wait_audit(
                lambda e, needle=needle: (
                    e.get("reason") == "lease_scope"  # type: ignore[misc]
                    and needle in str(e.get("detail"))
                ),
                what=f"a lease_scope refusal naming {needle}",
            )
        # Every receive-pack POST that reached github.com was an allowed, swapped
        # one (the pushes, and git's empty "0000" probe before a chunked push);
        # the four refused ones never left the proxy.
        receive_posts = [
            e
            for e in w.proxy.audit_events()
            if e.get("event") == "swap" and str(e.get("path", "")).endswith("git-receive-pack")
        ]
        upstream_posts = [
            r for r in w.gh.requests if r.method == "POST" and r.path.endswith("git-receive-pack")
        ]
        assert len(upstream_posts) == len(receive_posts), (upstream_posts, receive_posts)
        refused_posts = [
            e for e in audit_refusals(w) if str(e.get("path", "")).endswith("git-receive-pack")
        ]
        assert len(refused_posts) == 4, refused_posts

        # Refused: another repository, even though the real token could read it.
        other = f"https://x-access-token:{placeholder}@github.com/{OTHER}.git"
        rc, out = await git(env, tmp_path, "ls-remote", other)
        assert rc != 0 and "403" in out, out
        w.proxy.wait_audit(
            lambda e: e.get("reason") == "lease_scope" and OTHER in str(e.get("detail")),
            what=f"a lease_scope refusal naming {OTHER}",
        )
        # Fetch of the allowed repository still works.
        rc, out = await git(env, work, "fetch", "-q", "origin")
        assert rc == 0, out
        assert os.environ.get("GIT_DIR") is None
