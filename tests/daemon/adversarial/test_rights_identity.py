"""As root with --exec-user, the daemon touches the workspace only with the exec user's rights.

- File tools: a root-only file inside the workspace is as unreadable for
  ``file_read`` and ``file_search`` as for the agent; a root-owned directory
  inside it refuses ``file_write``; what the tools create belongs to the agent.
- Programs: ripgrep, git and the type checker the daemon starts over the
  workspace run as the exec user. Each is reached through a wrapper first on
  the daemon's PATH that records ``id -u``/``id -g`` and its own
  ``/proc/<pid>/status`` before ``exec``-ing the real program (same pid).
- The daemon's own threads carry the exec user's filesystem uid
  (``/proc/<pid>/task/*/status``, fourth ``Uid:`` field).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airlock.daemon.errors import AirlockError
from tests.daemon.adversarial.rights_rig import USER, rig
from tests.fakes.checkout import in_view, process_view
from tests.fakes.daemon_harness import running_daemon

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")

WRAPPED = ("rg", "git", "basedpyright")


def _wrap(bin_dir: Path, log: Path) -> None:
    """A recording wrapper per program, in front of the real one on PATH."""
    for name in WRAPPED:
        # The ripgrep wheel's rg is the newer; seen through the view the exec user can reach.
        beside = in_view(process_view(), Path(sys.executable)).parent / name
        real = str(beside) if beside.exists() else shutil.which(name)
        script = bin_dir / name
        # One printf per run: concurrent runs (git twice at once) append whole records.
        script.write_text(
            "#!/bin/sh\n"
            f'rec="{name} $(id -u) $(id -g) $*\n'
            "$(grep -E '^(Uid|Gid):' /proc/$$/status)\"\n"
            f"printf '%s\\n.\\n' \"$rec\" >> {log}\n"
            f'exec {real} "$@"\n'
        )
        script.chmod(0o755)


def _records(log: Path) -> list[tuple[str, str, str, list[str]]]:
    """(name, id -u, id -g, status lines) per run recorded in ``log``."""
    out = []
    text = log.read_text() if log.exists() else ""
    for block in text.split("\n.\n"):
        lines = [x for x in block.splitlines() if x.strip()]
        if not lines:
            continue
        head = lines[0].split(" ", 3)
        if len(head) < 3:
            raise AssertionError(f"a torn record in the wrappers' log: {block!r}")
        out.append((head[0], head[1], head[2], [*lines[1:], head[3] if len(head) > 3 else ""]))
    return out


def _thread_fsuids(pid: int) -> set[int]:
    fsuids: set[int] = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        fsuids.add(int(line.split()[4]))
        except OSError:
            continue
    return fsuids


async def test_file_tools_and_programs_act_as_the_exec_user() -> None:
    nobody = pwd.getpwnam(USER)
    with rig() as r:
        ws = r.ws
        (ws / "root-only.txt").write_text("needle root-only\n")
        (ws / "root-only.txt").chmod(0o600)
        (ws / "root-dir").mkdir(mode=0o755)
        (ws / "mod.py").write_text("x: int = 'needle'\n")
        git = ["git", "-c", f"safe.directory={ws}", "-c", "user.name=t", "-c", "user.email=t@t"]
        git += ["-C", str(ws)]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "mod.py"], check=True)
        subprocess.run([*git, "commit", "-qm", "one"], check=True)
        subprocess.run(["chown", "-R", f"{nobody.pw_uid}:{nobody.pw_gid}", str(ws / ".git")])
        os.chown(ws / "mod.py", nobody.pw_uid, nobody.pw_gid)
        bin_dir = r.top / "bin"
        bin_dir.mkdir()
        logs = r.top / "logs"
        logs.mkdir()
        logs.chmod(0o777)
        log = logs / "ran.log"
        log.touch()
        log.chmod(0o666)  # the wrappers append as whichever user they run as
        _wrap(bin_dir, log)
        env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
        async with (
            running_daemon(ws, base_dir=r.base, env=env, extra_args=r.daemon_args()) as d,
            d.client() as c,
        ):
            with pytest.raises(AirlockError) as read_err:
                await c.file_read(path="root-only.txt")
            assert read_err.value.code == "forbidden", read_err.value
            with pytest.raises(AirlockError) as write_err:
                await c.file_write(path="root-dir/new.txt", content="x\n")
            assert write_err.value.code == "forbidden", write_err.value
            assert not (ws / "root-dir" / "new.txt").exists()
            await c.file_write(path="made.txt", content="mine\n")
            made = os.stat(ws / "made.txt")
            assert (made.st_uid, made.st_gid) == (nobody.pw_uid, nobody.pw_gid)
            found = await c.file_search(pattern="needle", output_mode="files_with_matches")
            assert "root-only.txt" not in (found.files or []), found
            assert "mod.py" in (found.files or []), found
            (ws / "mod.py").write_text("x: int = 'needle'   \n")
            await c.diagnostics(paths=["mod.py"], checks=["git-diff", "types"])
            fsuids = _thread_fsuids(d.process.pid)
        recorded = _records(log)  # before the rig (and the log) is removed
        assert fsuids == {nobody.pw_uid}, f"daemon threads with other fsuids: {fsuids}"
    runs = [x for x in recorded if "--version" not in x[3][-1]]
    by_name = {name: [x for x in runs if x[0] == name] for name in WRAPPED}
    for name, seen in by_name.items():
        assert seen, f"{name} never ran: {runs}"
        for _n, uid, gid, status in seen:
            assert (uid, gid) == (str(nobody.pw_uid), str(nobody.pw_gid)), (name, uid, gid)
            uid_line = next(x for x in status if x.startswith("Uid:"))
            assert set(uid_line.split()[1:]) == {str(nobody.pw_uid)}, (name, uid_line)
