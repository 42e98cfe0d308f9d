"""Shared pieces of the adversarial suite: a real airlockd per test, hostile helpers.

Every test here runs the real daemon as a subprocess (``tests.fakes.daemon_harness``)
and attacks it from other real processes; ``resolver`` runs a test once with
``openat2`` and once with the forced component walk (``AIRLOCK_RESOLVER=walk``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import pwd
import shutil
import stat
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from airlock.client.daemon import DaemonClient
from airlock.daemon.errors import AirlockError
from tests.daemon.adversarial.diag_plant import (  # noqa: F401 (fixtures for the diagnostics tests)
    hostile_ws_fixture,
    markers_fixture,
    open_base_fixture,
)
from tests.daemon.adversarial.rights_rig import Rig
from tests.fakes.checkout import process_view
from tests.fakes.daemon_harness import RunningDaemon, running_daemon


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def resolver_env(resolver: str) -> dict[str, str]:
    return {"AIRLOCK_RESOLVER": "walk" if resolver == "walk" else "openat2"}


@asynccontextmanager
async def daemon_for(
    workspace: Path, resolver: str = "openat2", extra_args: tuple[str, ...] = ()
) -> AsyncIterator[RunningDaemon]:
    async with running_daemon(
        workspace, env=resolver_env(resolver), extra_args=extra_args
    ) as daemon:
        yield daemon


def tree_digest(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (never following links): type, mode and content hash."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            st = os.lstat(path)
            kind = stat.S_IFMT(st.st_mode)
            digest = ""
            if stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                digest = os.readlink(path)
            out[str(path.relative_to(root))] = f"{kind:o} {stat.S_IMODE(st.st_mode):o} {digest}"
    return out


async def outcome(call: Callable[[], Any]) -> tuple[str, str]:
    """(``ok`` or the error code, the whole response or error message as text)."""
    try:
        result = await call()
    except AirlockError as exc:
        return str(exc.code), f"{exc.message} {exc.details}"
    return "ok", repr(result)


@asynccontextmanager
async def attacker(
    a: Path, b: Path, *, user: str | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """The swapping attacker as a real process; stopped (and the tree restored) on exit.

    ``user``: run it as that user (the exec user, as a hostile agent would be).
    """
    who: dict[str, Any] = {}
    python = sys.executable
    if user is not None:
        entry = pwd.getpwnam(user)
        who = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        # The system's interpreter: the test's own may sit where that user cannot run it
        # (a pyenv under /root); the attacker needs nothing beyond the standard library.
        python = shutil.which("python3", path=os.defpath) or sys.executable
    proc = await asyncio.create_subprocess_exec(
        python,
        "-m",
        "tests.daemon.adversarial.attacker",
        "swap",
        str(a),
        str(b),
        cwd=str(process_view()),  # the checkout as that user can see it (any location)
        stdout=asyncio.subprocess.PIPE,
        **who,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    assert line.strip() == b"ready", line
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


@asynccontextmanager
async def under_swap(r: Rig, resolver: str) -> AsyncIterator[DaemonClient]:
    """A client of a daemon over the rig's workspace (exec user ``nobody``) while
    ``nobody``'s attacker keeps exchanging the rig's directory and symlink."""
    async with (
        running_daemon(
            r.ws, base_dir=r.base, env=resolver_env(resolver), extra_args=r.daemon_args()
        ) as d,
        d.client() as c,
        attacker(*r.swap, user="nobody"),
    ):
        yield c
