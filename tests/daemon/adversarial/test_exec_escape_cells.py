"""``env -i setsid -f`` and double forks, as the exec user, under both tracking modes.

No environment marker survives ``env -i`` and ``setsid -f``'s parent exits at
once (no polling window can see the child below the command): the sweep must
find the escapee by its cell, the command's cgroup (``--exec-tracking cgroup``)
or its group tag (``--exec-tracking tree``, the fallback where the cgroup tree
is not writable). Each escapee writes its pid before the command ends, then
must be gone once the call returns (or once ``process_kill`` answers).
"""

from __future__ import annotations

import os

import pytest

from airlock.daemon.identity import ExecUser
from airlock.daemon.procs.cgroup import own_cgroup_dir
from tests.daemon.adversarial.as_exec_user import USER, daemon_as_root, needs_root, status_field
from tests.fakes.wait import pid_alive, wait_until

pytestmark = [needs_root]

# The escapee notes its pid in the workspace and sleeps; the command waits for the note.
SETSID_F = "env -i setsid -f /bin/sh -c 'echo $$ > {name}; exec sleep 300'"
DOUBLE_FORK = "( env -i setsid /bin/sh -c 'echo $$ > {name}; exec sleep 300' & )"
WAIT_NOTE = "; while [ ! -s {name} ]; do sleep 0.01; done"


def cgroup_writable() -> bool:
    own = own_cgroup_dir()
    return own is not None and (own / "cgroup.procs").exists() and os.access(own, os.W_OK)


@pytest.fixture(params=["cgroup", "tree"])
def tracking(request: pytest.FixtureRequest) -> str:
    if request.param == "cgroup" and not cgroup_writable():
        pytest.skip(
            "no writable cgroup v2 tree here: the cgroup path did not run (mount cgroup2 "
            "read-write, e.g. a privileged container, to run it)"
        )
    return str(request.param)


async def test_exec_escapees_are_swept(tracking: str) -> None:
    script = (
        SETSID_F.format(name="a")
        + "; "
        + DOUBLE_FORK.format(name="b")
        + WAIT_NOTE.format(name="a")
        + WAIT_NOTE.format(name="b")
    )
    async with daemon_as_root(["--exec-tracking", tracking]) as (d, c):
        # What marks the escapee while the command runs: its cell, not an environment marker.
        probe = await c.exec(argv=["sh", "-c", "env -i cat /proc/self/status /proc/self/cgroup"])
        if tracking == "cgroup":
            assert f"/airlockd-{d.process.pid}/exec-" in probe.stdout, probe.stdout
        else:
            groups = {int(g) for g in probe.stdout.split("Groups:")[1].split("\n")[0].split()}
            assert groups - set(ExecUser.parse(USER).groups), "no tag group in the tree mode"
        out = await c.exec(argv=["sh", "-c", script], timeout_s=30)
        assert out.exit_code == 0, out
        pids = [int((d.workspace / name).read_text()) for name in ("a", "b")]
        await wait_until(
            lambda: not any(pid_alive(p) for p in pids), timeout=10, message=f"{pids} survived"
        )
        own = own_cgroup_dir()
        base = own / f"airlockd-{d.process.pid}" if tracking == "cgroup" and own else None
    if base is not None:
        assert not base.exists(), "the daemon's cgroup subtree outlived it"


async def test_background_escapees_are_swept_on_kill_and_exit(tracking: str) -> None:
    stays = SETSID_F.format(name="c") + WAIT_NOTE.format(name="c") + "; exec sleep 300"
    leaves = SETSID_F.format(name="e") + WAIT_NOTE.format(name="e")
    async with daemon_as_root(["--exec-tracking", tracking]) as (d, c):
        killed = await c.process_start(argv=["sh", "-c", stays])
        await c.process_start(argv=["sh", "-c", leaves])  # its root exits once noted
        notes = [d.workspace / "c", d.workspace / "e"]
        await wait_until(lambda: all(n.exists() and n.read_text().strip() for n in notes))
        escapees = [int(n.read_text()) for n in notes]
        assert status_field(escapees[0], "Uid").split()[0] != "0"  # it runs as the exec user
        await c.process_kill(id=killed.id, signal="KILL")
        await wait_until(
            lambda: not any(pid_alive(p) for p in escapees), timeout=10, message="escapee survived"
        )
