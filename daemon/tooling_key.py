"""The sandbox tooling revalidation key printed by ``airlockd --tooling-key``.

Orchestrators cache sandbox images and warm pod templates. A cache entry stays
valid only while the tools an agent sees inside it are the same: airlock itself,
the Python that runs it, ``git``, ``gh``, ``rg``, ``node`` and the libraries of the
``daemon`` extra (tree-sitter and its grammars, the ripgrep wheel, aiohttp,
pydantic). This module measures those versions *as installed* (not as some build
file claims) and hashes them, so a rebuild that silently picks up a new ``gh`` or
grammar yields a new key, and two builds with identical tools yield the same key.

The key is the SHA-256 of a canonical JSON manifest. A tool that is missing is
recorded as ``"absent"``, so installing or removing a tool changes the key too.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping

#: Bump when the manifest's shape changes, so old and new keys never collide.
SCHEMA = "airlock-tooling/1"

#: Executables whose ``--version`` first line enters the key.
EXECUTABLES: tuple[str, ...] = ("git", "gh", "rg", "node")

#: The extra whose installed distributions enter the key.
DAEMON_EXTRA = "daemon"

ABSENT = "absent"

_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")

Prober = Callable[[str], str]


def _normalise(name: str) -> str:
    """PEP 503 name normalisation, so `tree_sitter` and `tree-sitter` are one entry."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _find_executable(name: str) -> str | None:
    """PATH first, then the interpreter's own bin dir (where the ripgrep wheel puts `rg`).

    This mirrors how airlockd resolves its search engine, so the key describes the
    binary the daemon will actually run.
    """
    found = shutil.which(name)
    if found:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    return None


def probe_executable(name: str) -> str:
    """First non-empty line of ``NAME --version``, or ``absent``/``error: ...``."""
    path = _find_executable(name)
    if path is None:
        return ABSENT
    try:
        proc = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
            env={**os.environ, "GH_NO_UPDATE_NOTIFIER": "1", "LC_ALL": "C"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"error: {type(exc).__name__}"
    for line in (proc.stdout + "\n" + proc.stderr).split("\n"):
        if line.strip():
            return line.strip()
    return f"error: exit {proc.returncode}, no output"


def extra_distributions(dist: str = "airlock", extra: str = DAEMON_EXTRA) -> list[str]:
    """Names of the distributions that ``dist[extra]`` requires, normalised and sorted."""
    try:
        requires = importlib.metadata.requires(dist) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    names: set[str] = set()
    for req in requires:
        marker = _EXTRA_MARKER.search(req)
        name = _REQ_NAME.match(req)
        if marker and name and marker.group(1) == extra:
            names.add(_normalise(name.group(1)))
    return sorted(names)


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ABSENT


def tooling_manifest(probe: Prober = probe_executable) -> dict[str, str]:
    """Everything the key covers, as ``component -> version`` (readable for operators)."""
    manifest: dict[str, str] = {
        "schema": SCHEMA,
        "airlock": _dist_version("airlock"),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": f"{sys.platform}-{platform.machine()}",
    }
    for exe in EXECUTABLES:
        manifest[f"bin:{exe}"] = probe(exe)
    for dist in extra_distributions():
        manifest[f"py:{dist}"] = _dist_version(dist)
    return manifest


def key_of(manifest: Mapping[str, str]) -> str:
    """SHA-256 hex of the manifest's canonical JSON (sorted keys, no whitespace)."""
    canonical = json.dumps(dict(manifest), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def tooling_key() -> str:
    """The revalidation key of the tools installed here (64 lowercase hex digits)."""
    return key_of(tooling_manifest())
