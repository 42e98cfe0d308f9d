"""The one repository-root finder: the git work tree that holds a path.

Search uses it to decide where ignore files start to count; diagnostics uses it
to diff a file against its committed version. A work tree is the nearest
ancestor with a ``.git`` entry (a directory, or a file for worktrees and
submodules). Blocking (stat calls): callers on the event loop run it in a thread.
"""

from __future__ import annotations

from pathlib import Path


def find_work_tree(path: Path) -> Path | None:
    """The nearest directory at or above ``path`` (above, for a file) holding ``.git``."""
    for folder in (path, *path.parents) if path.is_dir() else path.parents:
        if (folder / ".git").exists():
            return folder
    return None
