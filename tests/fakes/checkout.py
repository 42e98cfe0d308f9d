"""The checkout as another user sees it, wherever it lives.

Tests that run code as a non-root user (the pod simulations, the sandbox
entrypoint as ``nobody``, the e2e topology) execute scripts and import the
package from this checkout. A clone under a 0700 directory (Debian puts home
directories there) is not traversable by that user, so those tests stage the
checkout in a world-traversable temporary directory first: a read-only bind
mount when the checkout is not reachable as it is, so nothing is copied and
the code run is exactly the code under test.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.fakes.mounts import mounted

REPO = Path(__file__).resolve().parents[2]


def traversable_by_others(path: Path) -> bool:
    """True when every directory from ``/`` down to ``path`` grants others search (x)."""
    return all(os.stat(d).st_mode & stat.S_IXOTH for d in (path, *path.parents))


@contextmanager
def shared_checkout() -> Iterator[Path]:
    """Yield a path to this checkout that any user can traverse.

    The checkout itself when it already is; otherwise a bind mount of it in a
    fresh 0755 temporary directory, unmounted on exit. Skips, saying so, when
    the mount cannot be made (not root, or no mount permission).
    """
    if traversable_by_others(REPO):
        yield REPO
        return
    base = Path(tempfile.mkdtemp(prefix="al-checkout-"))
    base.chmod(0o755)
    if not traversable_by_others(base):
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip(
            f"the checkout {REPO} and the temp dir {base.parent} are not traversable by other "
            "users: set TMPDIR to a world-traversable directory; these tests did not run and "
            "it is NOT a pass"
        )
    view = base / "repo"
    view.mkdir()
    with mounted(
        ["mount", "--bind", "-o", "ro", str(REPO), str(view)],
        view,
        lambda: shutil.rmtree(base, ignore_errors=True),
        lambda why: (
            f"the checkout {REPO} is under a directory other users cannot traverse, and a "
            f"bind mount of it failed ({why}): run as root with mount permission or clone "
            "somewhere world-traversable; these tests did not run and it is NOT a pass"
        ),
    ) as mount:
        yield mount


def in_view(view: Path, path: Path) -> Path:
    """Where ``path`` (inside the checkout) is seen through ``view``; other paths unchanged."""
    try:
        # Not resolved: a venv's interpreter is a symlink out of the checkout.
        return view / Path(os.path.abspath(path)).relative_to(REPO)
    except ValueError:
        return path


@pytest.fixture(scope="session")
def shared_repo() -> Iterator[Path]:
    """The checkout, traversable by the non-root users the tests act as (import where used)."""
    with shared_checkout() as view:
        yield view


_process_view: Path | None = None


def process_view() -> Path:
    """One shared view for this process (made on first use, removed at exit).

    For helpers that start processes outside a fixture (the daemon harness): a
    daemon running as root with ``--exec-user`` starts programs from its own
    install (rg beside its interpreter), which the exec user must reach too.
    """
    global _process_view
    if _process_view is None:
        if traversable_by_others(REPO):
            _process_view = REPO
        else:
            stack = contextlib.ExitStack()
            _process_view = stack.enter_context(shared_checkout())
            atexit.register(stack.close)
    return _process_view
