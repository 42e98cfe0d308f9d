"""Fixtures for the client tests: the local GitHub (see tests/fakes/github.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.github import FakeGitHub


@pytest.fixture
async def fake_github(tmp_path: Path) -> AsyncIterator[FakeGitHub]:
    """A running fake GitHub with org ``acme`` and a repository ``acme/widgets``."""
    async with FakeGitHub(tmp_path / "github", org="acme") as gh:
        await gh.create_repo("acme/widgets")
        yield gh
