"""`make run` (scripts/dev-run.sh) reports a proxy that did not come up.

It used to print "airlock-proxy listens on 127.0.0.1:8080" when the proxy had
already exited because the port was taken. Real processes, a real busy port.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.fakes.net import free_port

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "dev-run.sh"


def _env(tmp_path: Path, port: int) -> dict[str, str]:
    return {
        **os.environ,
        "AIRLOCK_DEV_BIN": str(Path(sys.executable).parent),
        "AIRLOCK_DEV_STATE": str(tmp_path / "st"),
        "AIRLOCK_DEV_PROXY_PORT": str(port),
        "XDG_STATE_HOME": str(tmp_path / "xdg"),
    }


def test_a_taken_proxy_port_is_reported_not_announced(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            ["bash", str(SCRIPT)],
            env=_env(tmp_path, port),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "airlock-proxy exited" in proc.stderr and str(port) in proc.stderr
    assert "listens on" not in proc.stdout
    # The daemon it had started is stopped again: its socket is gone.
    assert not (tmp_path / "st" / "airlockd.sock").exists()


def test_a_free_port_is_announced_once_both_listen(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        ["bash", str(SCRIPT)],
        env=_env(tmp_path, port),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("airlockd serves"), first + (
            proc.stderr.read() if proc.stderr else ""
        )
        second = proc.stdout.readline()
        assert f"listens on 127.0.0.1:{port}" in second
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
