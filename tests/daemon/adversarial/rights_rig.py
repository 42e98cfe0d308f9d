"""A workspace the agent (``nobody``) owns, next to a root-only vault, for the exec-user races.

Layout (under a fresh 0755 directory)::

    ws/            owned by nobody: the agent may rename anything here
      d/           a real directory: canary.txt "harmless", secret.txt "nothing here"
      l -> vault/out   a symlink the attacker exchanges with d (renameat2)
    vault/         root, 0700: nobody cannot even traverse it
      out/         0755: canary.txt and secret.txt hold CANARY (0644 and 0600, root's)
    d/             the daemon's socket, state and artifacts (root, 0755)

Anything carrying ``CANARY`` in an answer came from a place the agent cannot
reach by itself: the daemon acted with root's rights on a name the agent
controlled.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

USER = "nobody"


@dataclass
class Rig:
    top: Path
    ws: Path
    base: Path
    vault: Path
    canary: str

    @property
    def swap(self) -> tuple[Path, Path]:
        return self.ws / "d", self.ws / "l"

    def daemon_args(self) -> list[str]:
        return ["--exec-user", USER]


@contextmanager
def rig() -> Iterator[Rig]:
    user = pwd.getpwnam(USER)
    top = Path(tempfile.mkdtemp(prefix="al-rights-"))
    top.chmod(0o755)
    canary = "CANARY-" + secrets.token_hex(8)
    ws = top / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "canary.txt").write_text("harmless\n")
    (ws / "d" / "secret.txt").write_text("nothing here\n")
    vault = top / "vault"
    (vault / "out").mkdir(parents=True)
    vault.chmod(0o700)
    (vault / "out").chmod(0o755)
    (vault / "out" / "canary.txt").write_text(f"{canary}\n")
    (vault / "out" / "canary.txt").chmod(0o644)
    (vault / "out" / "secret.txt").write_text(f"{canary}\n")
    (vault / "out" / "secret.txt").chmod(0o600)
    os.symlink(vault / "out", ws / "l")
    for path in (ws, ws / "d", ws / "d" / "canary.txt", ws / "d" / "secret.txt"):
        os.chown(path, user.pw_uid, user.pw_gid)
    os.chown(ws / "l", user.pw_uid, user.pw_gid, follow_symlinks=False)
    base = top / "daemon"
    base.mkdir(mode=0o755)
    try:
        yield Rig(top, ws, base, vault, canary)
    finally:
        shutil.rmtree(top, ignore_errors=True)
