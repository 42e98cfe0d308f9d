"""Path normalisation and globs: ambiguous encodings are refused, globs are segment-aware."""

from __future__ import annotations

import pytest

from airlock.proxy.scope.paths import AmbiguousPath, glob_match, normalize_path


@pytest.mark.parametrize(
    "target",
    [
        "/repos/o/r%2F..%2Fother/pulls",
        "/repos/o/r/%2e%2e/other",
        "/repos/o/r/%2E/x",
        "/repos//o/r",
        "/repos/o/r\\..\\x",
        "/repos/o/r/%5c",
        "/repos/o/r/\0",
        "/repos/o/r/%00",
        "/repos/o/r/%zz",
        "repos/o/r",
        "/repos/o/r/../x",
        "/repos/o/x/../r/pulls",
        "/repos/o/r/./pulls",
        "/../../etc",
        "/a/b/..",
    ],
)
def test_ambiguous_paths_are_refused(target: str) -> None:
    with pytest.raises(AmbiguousPath):
        normalize_path(target)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("/repos/o/r/pulls?state=open", "/repos/o/r/pulls"),
        ("/repos/o/r%20x", "/repos/o/r x"),
        ("/repos/o/r/", "/repos/o/r/"),
        ("/repos/o/r/a..b/.c", "/repos/o/r/a..b/.c"),  # dots inside a segment are names
    ],
)
def test_normalisation(target: str, expected: str) -> None:
    assert normalize_path(target) == expected


def test_dot_segment_removal() -> None:
    from airlock.proxy.scope.paths import remove_dot_segments

    assert remove_dot_segments("/repos/o/r/../x") == "/repos/o/x"
    assert remove_dot_segments("/../../etc") == "/etc"
    assert remove_dot_segments("/a/b/..") == "/a/"
    assert remove_dot_segments("/a/./b/.") == "/a/b/"


@pytest.mark.parametrize(
    ("pattern", "value", "ok"),
    [
        ("/repos/o/r/**", "/repos/o/r", True),
        ("/repos/o/r/**", "/repos/o/r/pulls/1/files", True),
        ("/repos/o/r/**", "/repos/o/rx", False),
        ("/repos/o/r/**", "/repos/o/other", False),
        ("/repos/*/r", "/repos/o/r", True),
        ("/repos/*/r", "/repos/o/x/r", False),
        ("/a/**/z", "/a/z", True),
        ("/a/**/z", "/a/b/c/z", True),
        ("refs/heads/agent/*", "refs/heads/agent/fix", True),
        ("refs/heads/agent/*", "refs/heads/agent/a/b", False),
        ("refs/heads/agent/*", "refs/heads/main", False),
        ("refs/heads/agent/**", "refs/heads/agent/a/b", True),
        ("/x.y", "/xzy", False),  # regex characters are literal
    ],
)
def test_globs(pattern: str, value: str, ok: bool) -> None:
    assert glob_match(pattern, value) is ok
