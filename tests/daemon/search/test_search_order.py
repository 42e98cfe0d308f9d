"""Same query, same answer: ordering is stable and path-sorted on a 2,000-file tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.daemon.search.walk import path_key
from tests.daemon.search.support import Call


@pytest.fixture
def big_tree(ws: Path) -> None:
    for d in range(40):
        folder = ws / f"pkg{d % 7}" / f"mod-{d}"
        folder.mkdir(parents=True, exist_ok=True)
        for f in range(50):
            body = "".join(
                f"line {n} {'token' if (n + f) % 9 == 0 else 'other'}\n" for n in range(30)
            )
            (folder / f"file_{f}.py").write_text(body)
    # Names whose string order differs from path order ("a.txt" vs "a/").
    (ws / "pkg0.txt").write_text("token\n")
    (ws / "pkg0-x").mkdir()
    (ws / "pkg0-x" / "z.txt").write_text("token\n")


@pytest.mark.slow
@pytest.mark.usefixtures("big_tree")
@pytest.mark.parametrize(
    ("args", "key"),
    [
        ({"pattern": "token", "limit": 200, "offset": 500}, "files"),
        ({"pattern": "token", "output_mode": "content", "limit": 200, "offset": 300}, "matches"),
        ({"pattern": "token", "output_mode": "count", "limit": 150}, "counts"),
    ],
)
async def test_ordering_stable_across_20_runs(
    call: Call, args: dict[str, object], key: str
) -> None:
    first = await call("file_search", args)
    rows = first[key]
    assert len(rows) == args["limit"]
    paths = [r if isinstance(r, str) else r["path"] for r in rows]
    lines = [0 if isinstance(r, str) else r.get("line", 0) for r in rows]
    assert list(zip(paths, lines, strict=True)) == sorted(
        zip(paths, lines, strict=True), key=lambda pl: (path_key(pl[0]), pl[1])
    )
    for _ in range(19):
        assert await call("file_search", args) == first


@pytest.mark.usefixtures("big_tree")
async def test_pages_are_consecutive_slices(call: Call) -> None:
    everything = []
    offset = 0
    while True:
        page = await call("file_search", {"pattern": "token", "limit": 200, "offset": offset})
        everything += page["files"]
        offset += 200
        if not page["truncated"]:
            break
    assert len(everything) == len(set(everything)) == 2002
    assert everything == sorted(everything, key=path_key)
    # Component-wise: the directory "pkg0" sorts before "pkg0-x" and "pkg0.txt".
    assert everything.index("pkg0/mod-0/file_0.py") < everything.index("pkg0-x/z.txt")
    assert everything.index("pkg0-x/z.txt") < everything.index("pkg0.txt")
