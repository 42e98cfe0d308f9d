"""git smart HTTP scope: repositories, and a push's command list judged before the pack."""

from __future__ import annotations

import pytest

from airlock.proxy.protocol import Allow, GitAllow
from airlock.proxy.scope import git as g
from airlock.proxy.scope.check import ALLOWED, BodyGate, Refusal, check_head

ZERO = "0" * 40
A = "a" * 40
B = "b" * 40


def pkt(line: bytes) -> bytes:
    return b"%04x" % (len(line) + 4) + line


def commands(*lines: bytes, caps: bytes = b"report-status side-band-64k") -> bytes:
    out = b""
    for i, line in enumerate(lines):
        out += pkt(line + (b"\0" + caps if i == 0 else b"") + b"\n")
    return out + b"0000"


def test_classify() -> None:
    r = g.classify("GET", "/o/r.git/info/refs", "service=git-upload-pack")
    assert (r.repo, r.service, r.discovery) == ("o/r", "git-upload-pack", True)
    assert g.classify("POST", "/o/r/git-receive-pack", "").push
    for method, path, query in [
        ("GET", "/o/r.git/info/refs", ""),
        ("GET", "/o/r.git/info/refs", "service=git-upload-archive"),
        ("GET", "/o/r.git/HEAD", ""),
        ("GET", "/o/r.git/objects/info/packs", ""),
        ("GET", "/o/r/git-upload-pack", ""),
        ("POST", "/o/r/info/lfs/objects/batch", ""),
    ]:
        with pytest.raises(g.GitRefused):
            g.classify(method, path, query)


def test_repos_compare_case_insensitively() -> None:
    assert g.repo_allowed("Acme/Widgets", ["acme/widgets"])
    assert g.repo_allowed("acme/widgets", ["acme/widgets.git"])
    assert not g.repo_allowed("acme/other", ["acme/widgets"])


def judge(body: bytes, refs: list[str] | None, delete: bool = False) -> None:
    updates = g.CommandList().feed(body, True)
    assert updates is not None
    g.judge_updates(updates, refs, delete)


def test_branch_push_allowed_main_refused() -> None:
    judge(commands(f"{A} {B} refs/heads/agent/x".encode()), ["refs/heads/agent/*"])
    with pytest.raises(g.GitRefused, match="refs/heads/main"):
        judge(
            commands(f"{A} {B} refs/heads/agent/x".encode(), f"{A} {B} refs/heads/main".encode()),
            ["refs/heads/agent/*"],
        )


def test_delete_needs_allow_delete() -> None:
    body = commands(f"{A} {ZERO} refs/heads/agent/x".encode())
    with pytest.raises(g.GitRefused, match="deleting"):
        judge(body, ["refs/heads/agent/*"])
    judge(body, ["refs/heads/agent/*"], delete=True)


def test_no_push_refs_means_fetch_only() -> None:
    with pytest.raises(g.GitRefused, match="fetch only"):
        judge(commands(f"{A} {B} refs/heads/agent/x".encode()), None)


def test_push_options_and_certificates_are_refused() -> None:
    with pytest.raises(g.GitRefused, match="push options"):
        judge(
            commands(f"{A} {B} refs/heads/agent/x".encode(), caps=b"report-status push-options"),
            ["refs/heads/**"],
        )
    cert = pkt(b"push-cert\0report-status\n") + pkt(b"certificate version 0.1\n")
    with pytest.raises(g.GitRefused, match="certificate"):
        g.CommandList().feed(cert, False)


def test_incremental_feed_and_bound() -> None:
    body = commands(f"{A} {B} refs/heads/agent/x".encode()) + b"PACK...."
    reader = g.CommandList()
    end = len(body) - 9  # the flush's last byte
    for i in range(end):
        assert reader.feed(body[i : i + 1]) is None
    assert reader.feed(body[end:]) is not None
    endless = b"".join(pkt(f"{A} {B} refs/heads/agent/{i:05d}\n".encode()) for i in range(2000))
    with pytest.raises(g.GitRefused, match="within"):
        g.CommandList().feed(endless, False)
    with pytest.raises(g.GitRefused, match="ended"):
        g.CommandList().feed(pkt(f"{A} {B} refs/heads/x\n".encode()), True)
    with pytest.raises(g.GitRefused, match="pkt-line"):
        g.CommandList().feed(b"zzzz", False)


def test_shallow_lines_are_skipped() -> None:
    body = pkt(f"shallow {A}\n".encode()) + commands(f"{A} {B} refs/heads/agent/x".encode())
    judge(body, ["refs/heads/agent/*"])


GIT = Allow(git=GitAllow(repos=["acme/widgets"], push_refs=["refs/heads/agent/*"]))


def test_check_head_git() -> None:
    assert (
        check_head(GIT, "github.com", "GET", "/acme/widgets.git/info/refs?service=git-upload-pack")
        is ALLOWED
    )
    refused = check_head(GIT, "github.com", "POST", "/acme/other.git/git-upload-pack")
    assert isinstance(refused, Refusal) and "acme/other" in refused.message
    assert isinstance(check_head(GIT, "github.com", "GET", "/acme/widgets.git/HEAD"), Refusal)
    gate = check_head(GIT, "github.com", "POST", "/acme/widgets.git/git-receive-pack")
    assert isinstance(gate, BodyGate)
    main = commands(f"{A} {B} refs/heads/main".encode())
    decision = gate.feed(main, False)
    assert isinstance(decision, Refusal) and "refs/heads/main" in decision.message
    fetch_only = Allow(git=GitAllow(repos=["acme/widgets"]))
    refused = check_head(fetch_only, "github.com", "POST", "/acme/widgets/git-receive-pack")
    assert isinstance(refused, Refusal) and "fetch only" in refused.message
    gzipped = check_head(
        GIT, "github.com", "POST", "/acme/widgets/git-receive-pack", content_encoding="gzip"
    )
    assert isinstance(gzipped, Refusal)
