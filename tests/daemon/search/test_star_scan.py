"""The venv note's directory scan: skipping leaf directories (link count 2) answers exactly
what listing every directory answers, over random trees."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from airlock.daemon.search.ignore import star_ignored_dirs

NAMES = ["a", "b", "c", ".v", "d e"]
# A tree: each directory is (has a '*' .gitignore, has a plain file, its subdirectories).
Tree = tuple[bool, bool, dict[str, object]]


def trees(depth: int, wide: int = 2) -> st.SearchStrategy[Tree]:
    """Trees whose first ``wide`` levels always branch, so leaves, one-child directories
    and '*' files two levels down all occur often."""
    children: st.SearchStrategy[dict[str, object]] = (
        st.dictionaries(
            st.sampled_from(NAMES),
            trees(depth - 1, wide - 1),
            min_size=1 if wide > 0 else 0,
            max_size=3,
        )
        if depth > 0
        else st.just({})
    )
    return st.tuples(st.booleans(), st.booleans(), children)


def build(path: Path, tree: Tree, dirs: list[str], rel: str = "") -> None:
    star, plain, children = tree
    path.mkdir(exist_ok=True)
    if star:
        (path / ".gitignore").write_text("# written by a tool\n*\n")
    elif plain:
        (path / ".gitignore").write_text("*.log\n")
    if plain:
        (path / "file.txt").write_text("x\n")
    for name, sub in children.items():
        child_rel = f"{rel}/{name}" if rel else name
        dirs.append(child_rel)
        build(path / name, sub, dirs, child_rel)  # type: ignore[arg-type]


@settings(max_examples=120, deadline=None)
@given(
    tree=trees(4),
    depth=st.integers(min_value=1, max_value=3),
    cap=st.integers(min_value=1, max_value=5),
    pick=st.integers(min_value=0, max_value=50),
)
def test_leaf_skip_answers_what_a_full_listing_answers(
    tree: Tree, depth: int, cap: int, pick: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        dirs: list[str] = [""]
        build(root, tree, dirs)
        rel = dirs[pick % len(dirs)] if pick % 2 else ""  # the root half the time
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fast = star_ignored_dirs(root, rel, depth=depth, cap=cap, root_fd=fd)
            full = star_ignored_dirs(root, rel, depth=depth, cap=cap, root_fd=fd, trust_nlink=False)
        finally:
            os.close(fd)
        assert fast == full


def test_a_venv_two_levels_down_is_found_past_leaf_directories(tmp_path: Path) -> None:
    """Leaf directories are skipped, not the levels below a directory that has children."""
    for i in range(30):
        (tmp_path / f"d{i:02}").mkdir()
        (tmp_path / f"d{i:02}" / "f.txt").write_text("x\n")
    venv = tmp_path / "tools" / ".venv"
    venv.mkdir(parents=True)
    (venv / ".gitignore").write_text("*\n")
    assert star_ignored_dirs(tmp_path, "") == ["tools/.venv"]
    assert star_ignored_dirs(tmp_path, "", depth=1) == []
