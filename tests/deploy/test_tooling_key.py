"""The tooling revalidation key: deterministic, and it moves when any tool moves."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from airlock.daemon.tooling_key import (
    ABSENT,
    extra_distributions,
    key_of,
    probe_executable,
    tooling_key,
    tooling_manifest,
)


def test_key_is_sha256_hex_and_stable_across_processes() -> None:
    key = tooling_key()
    assert re.fullmatch(r"[0-9a-f]{64}", key)
    assert tooling_key() == key
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from airlock.daemon.tooling_key import tooling_key; print(tooling_key())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == key


def test_manifest_records_the_installed_versions() -> None:
    manifest = tooling_manifest()
    assert manifest["airlock"] != ABSENT
    assert manifest["python"].endswith(".".join(map(str, sys.version_info[:3])))
    git = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True)
    assert manifest["bin:git"] == git.stdout.strip()
    assert manifest["bin:rg"].startswith("ripgrep ")
    assert manifest["py:tree-sitter-python"] not in ("", ABSENT)
    assert manifest["py:ripgrep"] not in ("", ABSENT)


def test_daemon_extra_covers_grammars_but_not_proxy_deps() -> None:
    names = extra_distributions()
    assert "tree-sitter" in names
    assert "tree-sitter-python" in names
    assert "ripgrep" in names
    assert "mitmproxy" not in names
    assert "redis" not in names


def test_key_changes_when_one_tool_changes() -> None:
    base = tooling_manifest(probe=lambda name: f"{name} 1.0")
    bumped = tooling_manifest(probe=lambda name: "gh 2.0" if name == "gh" else f"{name} 1.0")
    gone = tooling_manifest(probe=lambda name: ABSENT if name == "node" else f"{name} 1.0")
    keys = {key_of(base), key_of(bumped), key_of(gone)}
    assert len(keys) == 3
    assert key_of(dict(reversed(list(base.items())))) == key_of(base)


def test_a_different_gh_on_path_gives_a_different_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tooling_key()
    fake = tmp_path / "gh"
    fake.write_text("#!/bin/sh\necho 'gh version 99.0.0 (fake)'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert probe_executable("gh") == "gh version 99.0.0 (fake)"
    assert tooling_key() != real


def test_missing_and_broken_tools_are_recorded_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "node"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert probe_executable("node") == "error: exit 3, no output"
    assert probe_executable("definitely-not-a-tool-xyz") == ABSENT
