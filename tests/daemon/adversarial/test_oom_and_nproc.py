"""The daemon protects itself: its OOM score is lowered, every agent process's is raised
and cannot be lowered back, and the exec user's processes have an ``RLIMIT_NPROC``."""

from __future__ import annotations

from pathlib import Path

from airlock.daemon.procs.contain import (
    CHILD_OOM_SCORE_ADJ,
    DAEMON_OOM_SCORE_ADJ,
    DEFAULT_MAX_PROCESSES,
)
from tests.daemon.adversarial.as_exec_user import cap_effective, daemon_as_root, needs_root

pytestmark = [needs_root]

CAP_SYS_RESOURCE = 24

# The command, a grandchild that escaped at once, and the limits each sees.
REPORT = (
    "cat /proc/self/oom_score_adj; "
    "env -i setsid /bin/sh -c 'cat /proc/self/oom_score_adj'; "
    "echo -500 > /proc/self/oom_score_adj 2>/dev/null; cat /proc/self/oom_score_adj; "
    "awk '/^Max processes/ {print $3, $4}' /proc/self/limits"
)


async def test_oom_scores_and_process_limit() -> None:
    async with daemon_as_root(["--exec-tracking", "tree"]) as (d, c):
        daemon_adj = int(Path(f"/proc/{d.process.pid}/oom_score_adj").read_text())
        if cap_effective("self", CAP_SYS_RESOURCE):
            assert daemon_adj == DAEMON_OOM_SCORE_ADJ
        else:
            # Without CAP_SYS_RESOURCE nobody can go below 0; the daemon stays at the floor.
            assert daemon_adj == 0
            assert "could not lower airlockd's oom_score_adj" in d.log()
        out = await c.exec(argv=["sh", "-c", REPORT])
        assert len(out.stdout.split()) == 5, out
        own, escaped, after_lowering, soft, hard = out.stdout.split()
        assert int(own) == int(escaped) == CHILD_OOM_SCORE_ADJ
        if cap_effective("self", CAP_SYS_RESOURCE):
            assert int(after_lowering) == CHILD_OOM_SCORE_ADJ, "an agent lowered its own score"
        assert int(soft) == int(hard) == DEFAULT_MAX_PROCESSES


async def test_process_limit_flag_stops_a_fork_bomb() -> None:
    # Threads and processes of nobody count; 40 is far below anything the runner has running.
    async with daemon_as_root(["--exec-max-processes", "40"]) as (_d, c):
        out = await c.exec(
            argv=["sh", "-c", "ulimit -p; i=0; while [ $i -lt 80 ]; do sleep 5 & i=$((i+1)); done"],
            timeout_s=30,
        )
        assert out.stdout.split()[0] == "40"
        assert "fork" in out.stderr.lower(), out
