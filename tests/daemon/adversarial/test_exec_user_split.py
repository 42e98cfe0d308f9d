"""--exec-user: agent commands run as another user who cannot touch the daemon's secrets.

airlockd runs as root here (the tests run as root, as in CI) with
``--exec-user nobody``; every check runs a real command through ``exec`` and
looks at what it could do.
"""

from __future__ import annotations

import os
import pwd
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from airlock.client.daemon import DaemonClient
from airlock.daemon.identity import ExecUser
from tests.daemon.adversarial.as_exec_user import USER, Layout, make_layout
from tests.fakes.daemon_harness import RunningDaemon, airlockd_exit, running_daemon

TOKEN = "w-" + "9" * 40

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch users")


@pytest.fixture
def layout() -> Iterator[Layout]:
    made = make_layout(f"{TOKEN} write\n", "al-xu-")
    yield made
    shutil.rmtree(made.top, ignore_errors=True)


@pytest.fixture
async def split(layout: Layout) -> AsyncIterator[tuple[Layout, RunningDaemon, DaemonClient]]:
    async with (
        running_daemon(
            layout.workspace,
            base_dir=layout.base,
            extra_args=["--exec-user", USER, "--token-file", str(layout.tokens)],
        ) as d,
        d.client(TOKEN) as c,
    ):
        yield layout, d, c


async def sh(c: DaemonClient, script: str) -> tuple[int | None, str, str]:
    r = await c.exec(argv=["sh", "-c", script])
    return r.exit_code, r.stdout, r.stderr


async def test_exec_runs_as_the_exec_user_with_its_groups_only(split) -> None:  # type: ignore[no-untyped-def]
    _layout, d, c = split
    expected = ExecUser.parse(USER)
    code, out, _ = await sh(c, "id -u; id -g; id -G; echo $HOME; echo $USER; echo $LOGNAME")
    assert code == 0
    uid, gid, groups, home, user, logname = out.strip().split("\n")
    assert int(uid) == expected.uid and int(gid) == expected.gid
    assert {int(g) for g in groups.split()} == set(expected.groups)
    assert 0 not in {int(g) for g in groups.split()}
    assert (home, user, logname) == (expected.home, USER, USER)
    assert "agent commands run as nobody" in d.log()


async def test_exec_user_cannot_read_the_token_or_write_state_or_artifacts(split) -> None:  # type: ignore[no-untyped-def]
    layout, d, c = split
    # Make a journal directory exist, as apply_patch would.
    await c.apply_patch(patch="*** Begin Patch\n*** Add File: p.txt\n+p\n*** End Patch\n")
    attempts = {
        "read the token file": f"cat {layout.tokens}",
        "list the state dir": f"ls -la {d.state_dir}",
        "plant a journal": f"echo '{{}}' > {d.state_dir}/journal.json",
        "make a dir in state": f"mkdir {d.state_dir}/x",
        "write a spill": f"echo x > {d.artifacts_dir}/exec-forged.stdout",
        "replace the state dir": f"mv {d.state_dir} {d.base_dir}/moved",
        "replace the token file": f"rm -f {layout.tokens}",
    }
    for what, script in attempts.items():
        code, out, err = await sh(c, script)
        assert code != 0, (what, out, err)
        assert TOKEN not in out and TOKEN not in err, what
    assert not (d.state_dir / "journal.json").exists() and not (d.state_dir / "x").exists()
    assert not (d.artifacts_dir / "exec-forged.stdout").exists()
    assert layout.tokens.read_text() == f"{TOKEN} write\n"
    assert d.state_dir.stat().st_uid == os.geteuid() and d.state_dir.stat().st_mode & 0o777 == 0o700


async def test_files_the_tools_create_stay_editable_by_the_exec_user(split) -> None:  # type: ignore[no-untyped-def]
    layout, _d, c = split
    await c.file_write(path="made.txt", content="by the tool\n")
    await c.file_write(path="sub/dir/deep.txt", content="deep\n", create_dirs=True)
    await c.apply_patch(patch="*** Begin Patch\n*** Add File: patched.txt\n+x\n*** End Patch\n")
    for name in ("made.txt", "sub/dir/deep.txt", "patched.txt"):
        code, _out, err = await sh(c, f"echo more >> {name}")
        assert code == 0, (name, err)
    code, _out, err = await sh(c, "touch sub/dir/new-by-agent")
    assert code == 0, err
    assert (layout.workspace / "made.txt").read_text() == "by the tool\nmore\n"


async def refused(*args: str) -> str:
    code, text = await airlockd_exit(*args)
    assert code == 2, text
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("airlockd: "), text
    return lines[0]


async def test_start_up_refusals_are_one_line_exit_2(layout: Layout) -> None:
    common = ["--workspace", str(layout.workspace), "--socket", str(layout.base / "d.sock")]
    line = await refused(*common, "--exec-user", "no-such-user-xyz")
    assert "no user 'no-such-user-xyz'" in line
    line = await refused(*common, "--exec-user", f"{USER}:no-such-group-xyz")
    assert "no group" in line
    line = await refused(*common, "--exec-user", "root")
    assert "unprivileged" in line
    line = await refused(*common, "--state-dir", str(layout.workspace / ".airlock-state"))
    assert "inside the root" in line
    assert not (layout.workspace / ".airlock-state").exists()
    extra = layout.top / "extra"
    extra.mkdir()
    line = await refused(
        *common, "--extra-root", str(extra), "--state-dir", str(extra / "st"), "--exec-user", USER
    )
    assert "inside the root" in line
    readable = layout.base / "readable-tokens"
    readable.write_text(f"{TOKEN} write\n")
    readable.chmod(0o644)
    line = await refused(*common, "--exec-user", USER, "--token-file", str(readable))
    assert "readable by --exec-user nobody" in line
    theirs = layout.base / "their-state"
    theirs.mkdir()
    user = pwd.getpwnam(USER)
    os.chown(theirs, user.pw_uid, user.pw_gid)
    line = await refused(*common, "--exec-user", USER, "--state-dir", str(theirs))
    assert "owned by uid" in line
    open_dir = layout.base / "open-artifacts"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    line = await refused(*common, "--exec-user", USER, "--artifacts-dir", str(open_dir))
    assert "writable by --exec-user" in line
    # The state dir under a directory the exec user could rename it out of.
    agent_owned = layout.top / "agent-owned"
    agent_owned.mkdir()
    os.chown(agent_owned, user.pw_uid, user.pw_gid)
    line = await refused(*common, "--exec-user", USER, "--state-dir", str(agent_owned / "state"))
    assert f"its parent {agent_owned} is writable by --exec-user nobody" in line


async def test_without_the_flag_the_log_says_who_runs_commands(workspace_dir: Path) -> None:
    async with running_daemon(workspace_dir) as d:
        assert "no --exec-user: exec and every program it starts run as airlockd's own user" in (
            d.log()
        )


async def test_exec_user_from_the_config_file(layout: Layout) -> None:
    config = layout.base / "airlockd.toml"
    config.write_text(f'exec_user = "{USER}"\n')
    async with (
        running_daemon(
            layout.workspace, base_dir=layout.base, extra_args=["--config", str(config)]
        ) as d,
        d.client() as c,
    ):
        code, out, _ = await sh(c, "id -u")
        assert code == 0 and int(out) == pwd.getpwnam(USER).pw_uid
