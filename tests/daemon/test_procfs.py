"""``procfs.task_files``: every thread's file of a live process, nothing for a gone one."""

from __future__ import annotations

import os
import subprocess
import sys

from airlock.daemon.procfs import task_files
from tests.fakes.procs import LINGER_ARGV


def test_children_of_every_thread_are_listed() -> None:
    child = subprocess.Popen(LINGER_ARGV)
    try:
        listed = {int(x) for _, data in task_files(os.getpid(), "children") for x in data.split()}
        assert child.pid in listed
        names = [data for _, data in task_files(child.pid, "comm")]
        assert names and all(n.strip() for n in names)
    finally:
        child.kill()
        child.wait()


def test_a_gone_process_has_no_tasks() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert list(task_files(proc.pid, "wchan")) == []
