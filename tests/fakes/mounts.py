"""A mount for the length of a test, or a visible skip when it cannot be made.

Tests that need a real mount (a small tmpfs to fill, a bind mount of the
checkout) need root or CAP_SYS_ADMIN; without it they skip saying what did
not run, and with it the mount is always taken down again.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def mounted(
    argv: Sequence[str],
    where: Path,
    cleanup: Callable[[], None],
    skip_reason: Callable[[str], str],
) -> Iterator[Path]:
    """Runs the ``mount`` command ``argv`` onto ``where`` and yields ``where``; lazily
    unmounts it after. ``cleanup`` (removing what held the mount point) runs after the
    unmount, or before skipping with ``skip_reason(mount's stderr)`` when it failed."""
    made = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if made.returncode != 0:
        cleanup()
        pytest.skip(skip_reason(made.stderr.strip()))
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
        cleanup()
