"""Finding airlockd's own cgroup v2 directory from ``/proc/self/cgroup`` and ``mountinfo``."""

from __future__ import annotations

from pathlib import Path

from airlock.daemon.procs.cgroup import cgroup_dir

HYBRID = (
    "35 25 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "36 25 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)


def test_the_v2_line_under_the_v2_mount() -> None:
    cgroups = "4:memory:/x\n0::/svc/a.scope\n"
    assert cgroup_dir(cgroups, HYBRID) == Path("/sys/fs/cgroup/unified/svc/a.scope")
    assert cgroup_dir("0::/\n", HYBRID) == Path("/sys/fs/cgroup/unified")


def test_a_mount_of_a_subtree_and_escaped_names() -> None:
    mounts = "40 30 0:27 /kube/pod1 /sys/fs/cgroup\\040x rw - cgroup2 cgroup2 rw\n"
    assert cgroup_dir("0::/kube/pod1/c\n", mounts) == Path("/sys/fs/cgroup x/c")


def test_nothing_without_v2() -> None:
    assert cgroup_dir("4:memory:/x\n", HYBRID) is None
    assert cgroup_dir("0::/\n", HYBRID.splitlines()[0]) is None
