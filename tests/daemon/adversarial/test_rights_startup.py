"""Start-up refuses a token file, state dir or artifacts dir the exec user could replace.

Through ANY ancestor, not only the file itself: one the exec user may write
without sticky protection, or one it owns (an owner can always chmod it
writable), and through a symlink on the way (the link itself sits in a
directory). Each refusal is one line naming the path, exit 2; a sticky,
world-writable parent (``/tmp``) with a root-owned directory in it is fine.
The first case is the issue's: a token file in a directory the agent can
write, where it swapped in its own write token, active after SIGHUP.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from tests.daemon.adversarial.rights_rig import USER, rig
from tests.daemon.adversarial.test_exec_user_split import TOKEN, refused
from tests.fakes.daemon_harness import running_daemon

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


def _tokens(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tokens"
    path.write_text(f"{TOKEN} write\n")
    path.chmod(0o600)
    return path


async def test_replaceable_through_an_ancestor_is_refused() -> None:
    nobody = pwd.getpwnam(USER)
    with rig() as r:
        common = ["--workspace", str(r.ws), "--socket", str(r.base / "d.sock")]
        as_agent = [*common, "--exec-user", USER]

        # A token file in a directory the agent may write.
        open_dir = r.top / "open"
        open_dir.mkdir()
        open_dir.chmod(0o777)
        line = await refused(*as_agent, "--token-file", str(_tokens(open_dir)))
        assert f"--token-file {open_dir / 'tokens'}: its parent {open_dir} is writable" in line

        # A token file two levels under a directory the agent owns (mode 0555: it can
        # chmod it back, then rename the middle directory away).
        owned = r.top / "owned"
        deep = owned / "mid"
        token = _tokens(deep)
        os.chown(owned, nobody.pw_uid, nobody.pw_gid)
        owned.chmod(0o555)
        line = await refused(*as_agent, "--token-file", str(token))
        assert f"its parent {owned} is owned by --exec-user {USER}" in line

        # A state dir whose great-grandparent the agent owns, read-only.
        line = await refused(*as_agent, "--state-dir", str(deep / "st" / "ate"))
        assert f"--state-dir {deep / 'st' / 'ate'}: its parent {owned} is owned" in line
        assert not (deep / "st").exists(), "nothing is created under a replaceable parent"

        # An artifacts dir reached through a symlink the agent could replace.
        safe = r.top / "safe"
        (safe / "artifacts").mkdir(parents=True)
        os.symlink(safe, open_dir / "link")
        line = await refused(*as_agent, "--artifacts-dir", str(open_dir / "link" / "artifacts"))
        assert f"its parent {open_dir} is writable by --exec-user {USER}" in line

        # A sticky, world-writable parent holding root's directories: accepted.
        sticky = r.top / "sticky"
        sticky.mkdir()
        sticky.chmod(0o1777)
        ok_token = _tokens(sticky / "keys")
        async with running_daemon(
            r.ws,
            base_dir=r.base,
            extra_args=[
                "--exec-user",
                USER,
                "--token-file",
                str(ok_token),
                "--state-dir",
                str(sticky / "state"),
            ],
        ) as d:
            assert d.process.returncode is None
