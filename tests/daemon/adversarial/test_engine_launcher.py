"""The engine launcher: the exec user's own process, yet out of the agent's reach.

airlockd (root, ``--exec-user nobody``) starts rg through one long-lived
launcher running as nobody (daemon/procs/launcher.py). A hostile process of
the same user must not be able to look into it (its descriptors would include
the daemon's socketpair end) nor trace it; killing it (which the agent may do
to any process of its own user) must cost nothing more than a restart: the
next search answers, and its engine is again the exec user's.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import subprocess
from pathlib import Path

import pytest

from airlock.daemon.identity import ExecUser
from airlock.daemon.procs.contain import CHILD_OOM_SCORE_ADJ
from airlock.daemon.procs.launcher import Launched, launcher_for
from tests.daemon.adversarial.as_exec_user import USER, daemon_as_root, needs_root
from tests.fakes.wait import wait_until

pytestmark = [needs_root, pytest.mark.asyncio]

_MARK = b"PR_SET_PDEATHSIG"  # in the launcher's ``-c`` source, hence its cmdline


def _launchers(daemon_pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if int(fields.get("PPid", "0")) == daemon_pid and _MARK in cmdline:
            found.append(int(entry))
    return found


def _uids(pid: int) -> list[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError(f"no Uid line for {pid}")


def _as_agent(script: str) -> subprocess.CompletedProcess[str]:
    """``sh -c script`` as the exec user with no privilege left (the hostile process)."""
    user = pwd.getpwnam(USER)
    argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    return subprocess.run(
        [*argv, "--", "sh", "-c", script], capture_output=True, text=True, timeout=30
    )


async def test_launcher_runs_as_the_user_yet_is_closed_to_it_and_restarts_when_killed() -> None:
    nobody = pwd.getpwnam(USER)
    async with daemon_as_root() as (d, c):
        ws = d.workspace
        (ws / "a.txt").write_text("needle\n")
        os.chown(ws / "a.txt", nobody.pw_uid, nobody.pw_gid)
        found = await c.file_search(pattern="needle", output_mode="files_with_matches")
        assert found.files == ["a.txt"], found
        first = _launchers(d.process.pid)
        assert len(first) == 1, f"expected one launcher under airlockd, saw {first}"
        pid = first[0]
        assert set(_uids(pid)) == {nobody.pw_uid}, "the launcher must be the exec user's"
        adj = Path(f"/proc/{pid}/oom_score_adj").read_text().strip()
        assert adj == str(CHILD_OOM_SCORE_ADJ), "its engines must be killed before the daemon"

        peek = _as_agent(
            f"ls /proc/{pid}/fd && echo LISTED; cat /proc/{pid}/environ >/dev/null && echo READ"
        )
        assert "LISTED" not in peek.stdout and "READ" not in peek.stdout, peek
        if _has("gdb") or _has("strace"):
            tracer = "strace -p" if _has("strace") else "gdb -batch -p"
            traced = _as_agent(f"timeout 5 {tracer} {pid} -o /dev/null </dev/null && echo TRACED")
            assert "TRACED" not in traced.stdout, traced

        killed = _as_agent(f"kill -9 {pid} && echo KILLED")
        assert "KILLED" in killed.stdout, killed
        await wait_until(lambda: pid not in _launchers(d.process.pid), timeout=10)

        again = await c.file_search(pattern="needle", output_mode="count")
        assert again.counts is not None and [x.count for x in again.counts] == [1], again
        second = _launchers(d.process.pid)
        assert len(second) == 1 and second[0] != pid, (pid, second)
        assert set(_uids(second[0])) == {nobody.pw_uid}
        assert "restarting on next use" in d.log()


def _has(program: str) -> bool:
    return any(os.access(Path(p) / program, os.X_OK) for p in os.environ["PATH"].split(":"))


async def _output(proc: Launched) -> tuple[bytes, bytes, int]:
    assert proc.stdout is not None and proc.stderr is not None
    out, err = await asyncio.gather(proc.stdout.read(), proc.stderr.read())
    code = await proc.wait()
    proc.release()
    return out, err, code


async def test_launcher_gives_the_child_its_descriptors_by_number_and_its_directory(
    tmp_path: Path,
) -> None:
    """Recount names files by descriptor number under ``/proc/self/fd``: they must be there."""
    user = ExecUser.parse(USER)
    tmp_path.chmod(0o755)
    names = []
    for n in range(3):
        (tmp_path / f"f{n}").write_text(f"body {n}\n")
        names.append(tmp_path / f"f{n}")
    fds = [os.open(p, os.O_RDONLY | os.O_CLOEXEC) for p in names]
    where = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    launcher = launcher_for(user)
    try:
        proc = await launcher.spawn(
            ["cat", *(str(fd) for fd in reversed(fds))],
            cwd="/proc/self/fd",
            env=None,
            pass_fds=fds,
            new_session=False,
        )
        out, err, code = await _output(proc)
        assert (code, err) == (0, b""), err
        assert out == b"body 2\nbody 1\nbody 0\n"
        here = await launcher.spawn(
            ["sh", "-c", "pwd -P; id -u"],
            cwd=f"/proc/self/fd/{where}",
            env=None,
            pass_fds=(),
            new_session=True,
        )
        out, _, code = await _output(here)
        assert code == 0 and out.decode().split() == [str(tmp_path), str(user.uid)], out
        with pytest.raises(OSError):
            await launcher.spawn(
                ["/nonexistent/engine"], cwd="/", env=None, pass_fds=(), new_session=False
            )
        assert launcher.alive, "a failed start is an answer, not the launcher's end"
    finally:
        launcher.close()
        for fd in [*fds, where]:
            os.close(fd)
