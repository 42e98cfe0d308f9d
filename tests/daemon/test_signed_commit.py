"""airlock-signed-commit without a server: arguments, the guard, staged-change
collection, origin checks and endpoint selection, on real git repositories."""

from __future__ import annotations

import io
import os
import re
import subprocess
from pathlib import Path

import pytest

from airlock.daemon.signed_commit import SignedCommitError, main, run
from airlock.daemon.signed_commit.args import parse_args
from airlock.daemon.signed_commit.commit import create_commit, file_changes, origin_source
from airlock.daemon.signed_commit.github import Endpoints, GitHubClient, GraphQLError, ssl_context
from airlock.daemon.signed_commit.gitops import Change, Git, basic_extraheader

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(repo: Path, *args: str, input_bytes: bytes | None = None) -> str:
    env = {**os.environ, **GIT_ENV, "HOME": str(repo.parent)}
    proc = subprocess.run(
        ["git", *args], cwd=repo, env=env, input=input_bytes, capture_output=True, check=True
    )
    return proc.stdout.decode()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "clone"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "keep.txt").write_text("keep\n")
    (path / "gone.txt").write_text("bye\n")
    (path / "edit.txt").write_text("one\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "init")
    git(path, "remote", "add", "origin", "https://github.com/acme/widgets.git")
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(path)
    return path


def staged(repo: Path) -> list[Change]:
    with Git(repo) as g:
        return g.staged_changes()


def guard(repo: Path) -> None:
    with Git(repo) as g:
        g.guard_unstaged()


def state_of(repo: Path) -> tuple[bytes, dict[str, bytes]]:
    """The index bytes and every worktree file, to prove nothing changed."""
    index_path = repo / ".git" / "index"
    index = index_path.read_bytes() + str(index_path.stat().st_mtime_ns).encode()
    files = {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }
    return index, files


# ------------------------------------------------------------------ arguments

BASE_ARGS = ["--repo", "acme/widgets", "--branch", "feat", "-m", "Fix it"]


def test_parse_args_happy() -> None:
    opts = parse_args([*BASE_ARGS, "-b", "Body text", "--base", "develop"])
    assert (opts.repo, opts.branch, opts.headline, opts.body, opts.base) == (
        "acme/widgets",
        "feat",
        "Fix it",
        "Body text",
        "develop",
    )


def test_multiline_message_splits_into_headline_and_body() -> None:
    opts = parse_args(["--repo", "a/b", "--branch", "x", "-m", "Head\n\nmore words", "-b", "tail"])
    assert opts.headline == "Head"
    assert opts.body == "more words\n\ntail"


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        ([*BASE_ARGS, "--force"], "unknown argument(s): --force"),
        ([*BASE_ARGS, "extra"], "unknown argument(s): extra"),
        (["--rep", "acme/widgets", "--branch", "feat", "-m", "x"], "--repo"),
        (["--branch", "feat", "-m", "x"], "--repo"),
        (["--repo", "acme/widgets", "-m", "x"], "--branch"),
        (["--repo", "acme/widgets", "--branch", "feat"], "-m"),
        (["--repo", "acme", "--branch", "feat", "-m", "x"], "OWNER/REPO"),
        (["--repo", "acme/w/x", "--branch", "feat", "-m", "x"], "OWNER/REPO"),
        (["--repo", "acme/widgets", "--branch", "a..b", "-m", "x"], "not a valid branch"),
        (["--repo", "acme/widgets", "--branch", "-x", "-m", "x"], "--branch"),
        (["--repo", "acme/widgets", "--branch", "feat", "-m", "  "], "must not be empty"),
        ([*BASE_ARGS, "--base", "bad base"], "--base"),
    ],
)
def test_parse_args_errors(argv: list[str], fragment: str) -> None:
    with pytest.raises(SignedCommitError) as info:
        parse_args(argv)
    assert info.value.exit_code == 2
    assert fragment in str(info.value)


def test_main_reports_unknown_argument_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE_ARGS, "--amend"]) == 2
    err = capsys.readouterr().err
    assert "unknown argument(s): --amend" in err and "usage:" in err


def test_no_gh_token_says_to_use_the_github_shell_tool(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GH_TOKEN", raising=False)
    (repo / "edit.txt").write_text("two\n")
    git(repo, "add", "edit.txt")
    before = state_of(repo)
    assert main(BASE_ARGS) == 1
    err = capsys.readouterr().err
    assert "GH_TOKEN is not set" in err and "GitHub shell tool" in err
    assert state_of(repo) == before


# ------------------------------------------------------------------ the guard


def _run(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        code = run(argv, env, out, err)
    except SignedCommitError as exc:
        return exc.exit_code, out.getvalue(), str(exc)
    return code, out.getvalue(), err.getvalue()


def test_guard_refuses_unstaged_tracked_changes_before_any_network_call(repo: Path) -> None:
    (repo / "edit.txt").write_text("staged\n")
    git(repo, "add", "edit.txt")
    (repo / "edit.txt").write_text("staged\nand more, unstaged\n")
    (repo / "untracked.txt").write_text("fine\n")
    before = state_of(repo)
    # An API URL nothing listens on: reaching the network would be a different error.
    env = {"GH_TOKEN": "ph", "GITHUB_API_URL": "https://127.0.0.1:9", "GH_HOST": "github.com"}
    code, out, message = _run(BASE_ARGS, env)
    assert code == 1 and out == ""
    assert "unstaged changes to tracked files: edit.txt" in message
    assert "Nothing was sent" in message
    assert state_of(repo) == before
    assert git(repo, "status", "--porcelain") == "MM edit.txt\n?? untracked.txt\n"


def test_guard_lists_deleted_unstaged_files(repo: Path) -> None:
    (repo / "keep.txt").unlink()
    with pytest.raises(SignedCommitError, match=r"keep\.txt"):
        guard(repo)


def test_guard_ignores_untracked_and_stat_only_changes(repo: Path) -> None:
    (repo / "new.txt").write_text("untracked\n")
    os.utime(repo / "keep.txt", (1, 1))
    before = state_of(repo)
    guard(repo)
    assert state_of(repo) == before


# ------------------------------------------------------------------ staged changes


def test_staged_changes_collects_additions_and_deletions(repo: Path) -> None:
    blob = os.urandom(4096) + b"\0\xff\r\n"
    (repo / "bin.dat").write_bytes(blob)
    (repo / "edit.txt").write_text("two\n")
    (repo / "dir").mkdir()
    (repo / "dir" / "ünï cødé.txt").write_text("x\n")
    git(repo, "add", "bin.dat", "edit.txt", "dir")
    git(repo, "rm", "-q", "gone.txt")
    # The worktree differs from the index for bin.dat after staging: the staged
    # bytes are what is sent.
    changes = {c.path: c for c in staged(repo)}
    assert set(changes) == {"bin.dat", "edit.txt", "dir/ünï cødé.txt", "gone.txt"}
    assert changes["bin.dat"].kind == "addition" and changes["bin.dat"].contents == blob
    assert changes["edit.txt"].contents == b"two\n"
    assert changes["gone.txt"].kind == "deletion"
    payload = file_changes(list(changes.values()))
    assert {"path": "gone.txt"} in payload["deletions"]
    sent = {a["path"]: a["contents"] for a in payload["additions"]}
    import base64

    assert base64.b64decode(sent["bin.dat"]) == blob


def test_staged_rename_becomes_addition_plus_deletion(repo: Path) -> None:
    git(repo, "mv", "keep.txt", "moved.txt")
    kinds = {c.path: c.kind for c in staged(repo)}
    assert kinds == {"keep.txt": "deletion", "moved.txt": "addition"}


def test_type_change_is_an_addition(repo: Path) -> None:
    # T: a symlink replaced by a regular file.
    (repo / "link").symlink_to("keep.txt")
    git(repo, "add", "link")
    git(repo, "commit", "-q", "-m", "link")
    (repo / "link").unlink()
    (repo / "link").write_text("now a file\n")
    git(repo, "add", "link")
    status = git(repo, "diff", "--cached", "--name-status", "HEAD")
    assert status.startswith("T")
    (change,) = staged(repo)
    assert (change.kind, change.contents) == ("addition", b"now a file\n")


def test_empty_stage_is_refused(repo: Path) -> None:
    with pytest.raises(SignedCommitError, match="nothing is staged"):
        staged(repo)


def test_unmerged_paths_are_refused(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "edit.txt").write_text("other\n")
    git(repo, "commit", "-q", "-am", "other")
    git(repo, "checkout", "-q", "main")
    (repo / "edit.txt").write_text("main\n")
    git(repo, "commit", "-q", "-am", "main")
    subprocess.run(["git", "merge", "-q", "other"], cwd=repo, capture_output=True, check=False)
    with pytest.raises(SignedCommitError, match=r"unmerged paths: edit\.txt"):
        staged(repo)


def test_symlinks_are_refused(repo: Path) -> None:
    (repo / "ln").symlink_to("keep.txt")
    git(repo, "add", "ln")
    with pytest.raises(SignedCommitError, match="symbolic link"):
        staged(repo)


def test_unborn_head_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    (empty / "a").write_text("a")
    git(empty, "add", "a")
    with pytest.raises(SignedCommitError, match="no commit yet"):
        staged(empty)


def test_not_a_git_checkout(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(SignedCommitError, match="not inside a git checkout"):
        Git.discover(plain)


# ------------------------------------------------------------------ origin and endpoints


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        ("https://github.com/acme/widgets.git", "origin"),
        ("https://github.com/acme/widgets", "origin"),
        ("https://github.com/ACME/Widgets.git", "origin"),
        ("git@github.com:acme/widgets.git", "https://github.com/acme/widgets.git"),
        ("ssh://git@github.com/acme/widgets.git", "https://github.com/acme/widgets.git"),
    ],
)
def test_origin_source_accepts_the_declared_repository(origin: str, expected: str) -> None:
    assert origin_source(origin, "acme/widgets", "github.com") == expected


@pytest.mark.parametrize(
    "origin",
    [
        "https://github.com/acme/other.git",
        "https://evil.example/acme/widgets.git",
        "https://github.com.evil.example/acme/widgets.git",
        "git@evil.example:acme/widgets.git",
        "/srv/git/widgets.git",
        "file:///srv/git/acme/widgets.git",
    ],
)
def test_origin_source_refuses_anything_else(origin: str) -> None:
    with pytest.raises(
        SignedCommitError, match=re.escape("origin must be https://github.com/acme/widgets.git")
    ):
        origin_source(origin, "acme/widgets", "github.com")


def test_origin_pointing_elsewhere_is_refused_before_the_network(repo: Path) -> None:
    git(repo, "remote", "set-url", "origin", "https://github.com/acme/other.git")
    (repo / "edit.txt").write_text("two\n")
    git(repo, "add", "edit.txt")
    env = {"GH_TOKEN": "ph", "GITHUB_API_URL": "https://127.0.0.1:9", "GH_HOST": "github.com"}
    code, _, message = _run(BASE_ARGS, env)
    assert code == 1 and "not the repository acme/widgets" in message


@pytest.mark.parametrize(
    ("env", "rest", "graphql", "host"),
    [
        ({}, "https://api.github.com", "https://api.github.com/graphql", "github.com"),
        (
            {"GH_HOST": "ghe.example"},
            "https://ghe.example/api/v3",
            "https://ghe.example/api/graphql",
            "ghe.example",
        ),
        (
            {"GITHUB_API_URL": "https://ghe.example/api/v3/"},
            "https://ghe.example/api/v3",
            "https://ghe.example/api/graphql",
            "ghe.example",
        ),
        (
            {"GITHUB_API_URL": "https://127.0.0.1:8443", "GH_HOST": "127.0.0.1:9443"},
            "https://127.0.0.1:8443",
            "https://127.0.0.1:8443/graphql",
            "127.0.0.1:9443",
        ),
        (
            {
                "GITHUB_API_URL": "https://api.github.com",
                "GITHUB_GRAPHQL_URL": "https://g.example/gql",
            },
            "https://api.github.com",
            "https://g.example/gql",
            "github.com",
        ),
    ],
)
def test_endpoints_from_env(env: dict[str, str], rest: str, graphql: str, host: str) -> None:
    assert Endpoints.from_env(env) == Endpoints(rest, graphql, host)


@pytest.mark.parametrize(
    ("errors", "stale"),
    [
        ([{"type": "STALE_DATA", "message": "x"}], True),
        (
            [{"message": 'Expected branch to point to "abc" but it did not. Pull and try again.'}],
            True,
        ),
        ([{"message": "expectedHeadOid is stale"}], True),
        ([{"type": "NOT_FOUND", "message": "Could not resolve to a Repository"}], False),
        (["weird"], False),
    ],
)
def test_stale_head_detection(errors: list[object], stale: bool) -> None:
    assert GraphQLError(errors).is_stale_head is stale


def test_basic_extraheader_carries_the_placeholder() -> None:
    import base64

    header = basic_extraheader("airlock-gh-123")
    assert header.startswith("Authorization: Basic ")
    assert base64.b64decode(header.split()[-1]) == b"x-access-token:airlock-gh-123"


def test_broken_connection_during_the_mutation_is_not_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A socket that reads the request and hangs up: the commit may have landed,
    so the error says to check instead of retrying."""
    import socket
    import threading

    for name in (
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    accepted: list[int] = []

    def hang_up() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.recv(65536)
            accepted.append(1)
            conn.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{port}"
        client = GitHubClient(Endpoints(url, url + "/graphql", "github.com"), "ph", ssl_context({}))
        opts = parse_args(BASE_ARGS)
        with pytest.raises(SignedCommitError) as info:
            create_commit(client, opts, [Change("addition", "a", b"x")], "0" * 40, io.StringIO())
    finally:
        server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        server.close()
        thread.join(5)
    assert "may or may not have been created" in str(info.value)
    assert "0" * 40 in str(info.value)
    assert len(accepted) == 1
