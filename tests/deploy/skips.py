"""The deploy checks' visible skips: what did not run, why, and how to make it run."""

from __future__ import annotations

import os
import shutil

import pytest


def need_pod_user(what: str) -> None:
    """Skip unless this process can act as a pod's non-root user (root, with setpriv)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip(
            "needs root and setpriv (util-linux) to act as the pod's non-root user: the "
            f"{what} checks did not run; it is NOT a pass"
        )


def program_or_skip(name: str, reason: str) -> str:
    """The path of program ``name``, or a skip with ``reason`` (saying how to install it)."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(reason)
    return path
