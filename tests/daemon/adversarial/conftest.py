"""Shared set-up of the adversarial diagnostics tests: a workspace and a marker folder
that every user can reach (the exec user must be able to run what is planted)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon.adversarial.plant import Markers


@pytest.fixture
def open_base() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="al-adv-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def markers(open_base: Path) -> Markers:
    folder = open_base / "markers"
    folder.mkdir()
    folder.chmod(0o777)
    return Markers(folder)


@pytest.fixture
def hostile_ws(open_base: Path) -> Path:
    ws = open_base / "ws"
    ws.mkdir()
    ws.chmod(0o777)
    return ws
