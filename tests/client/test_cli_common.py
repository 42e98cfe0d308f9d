"""What every binary does alike: --version, --log-format, one-line config errors.

Real console scripts (the venv's ``airlockd``, ``airlock-proxy``, ``airlock``,
``airlock-signed-commit``) as real processes; each bad configuration must give
exit status 2 and exactly one line on stderr that names the flag or key.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from tests.fakes.wait import wait_until_sync

BIN = Path(sys.executable).parent
BINARIES = ("airlockd", "airlock-proxy", "airlock", "airlock-signed-commit")


def run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    return subprocess.run(
        [str(BIN / argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.mark.parametrize("binary", BINARIES)
def test_version_comes_from_the_package_metadata(binary: str) -> None:
    proc = run(binary, "--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{binary} {metadata.version('airlock')}"


@pytest.mark.parametrize("binary", BINARIES)
def test_every_binary_takes_log_format(binary: str) -> None:
    proc = run(binary, "--log-format", "yaml")
    if binary == "airlock-signed-commit":
        # A model runs this one (as gh-signed-commit): its usage errors keep the
        # usage lines after the one naming the flag, to show the fix.
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert "--log-format" in proc.stderr.splitlines()[0]
    else:
        one_line_error(proc, "--log-format")
    help_text = run(binary, "--help").stdout
    assert "--log-format" in help_text and "json" in help_text


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """Unix socket paths must stay short: a fresh dir under /tmp."""
    path = Path(tempfile.mkdtemp(prefix="al-cli-"))
    yield path
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _token_file(where: Path) -> Path:
    token = where / "tokens"
    token.write_text("t0ken-0123456789abcdef write\n")
    token.chmod(0o600)
    return token


def test_airlockd_configuration_errors_are_one_line(short_dir: Path) -> None:
    ws = short_dir / "ws"
    ws.mkdir()
    sock = str(short_dir / "d.sock")
    base = ("airlockd", "--workspace", str(ws), "--socket", sock)
    one_line_error(run(*base, "--log-level", "LOUD"), "--log-level", "LOUD")
    one_line_error(run(*base, "--token-file", str(short_dir / "nope")), "--token-file")
    (short_dir / "bad-tokens").write_text("just-one-field\n")
    one_line_error(run(*base, "--token-file", str(short_dir / "bad-tokens")), "--token-file")
    one_line_error(run(*base, "--socket-mode", "999"), "--socket-mode", "999")
    token = str(_token_file(short_dir))
    bare = run(*base, "--token-file", token, "--listen", "127.0.0.1:17072")
    one_line_error(bare, "--listen", "tcp://HOST:PORT")
    (short_dir / "bad.toml").write_text("workspace = [\n")
    one_line_error(run("airlockd", "--config", str(short_dir / "bad.toml")), "--config", "TOML")
    (short_dir / "extra.toml").write_text(
        f'workspace = "{ws}"\nsocket = "{sock}"\nfrobnicate = 1\n'
    )
    one_line_error(
        run("airlockd", "--config", str(short_dir / "extra.toml")), "unknown key 'frobnicate'"
    )
    (short_dir / "typed.toml").write_text(
        f'workspace = "{ws}"\nsocket = "{sock}"\nextra-root = 3\n'
    )
    one_line_error(run("airlockd", "--config", str(short_dir / "typed.toml")), "extra-root")
    assert not Path(sock).exists(), "nothing may be bound after a configuration error"


def test_airlockd_busy_tcp_port_leaves_no_socket_file(short_dir: Path) -> None:
    ws = short_dir / "ws"
    ws.mkdir()
    sock = short_dir / "d.sock"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run(
            "airlockd", "--workspace", str(ws), "--socket", str(sock),
            "--token-file", str(_token_file(short_dir)), "--listen", f"tcp://127.0.0.1:{port}",
        )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"--listen tcp://127.0.0.1:{port}" in proc.stderr.splitlines()[-1]
    assert not sock.exists(), "the Unix socket file was left behind"


def _start_daemon(args: list[str], short_dir: Path) -> tuple[subprocess.Popen[str], Path]:
    sock = short_dir / "d.sock"
    proc = subprocess.Popen(
        [str(BIN / "airlockd"), *args],
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")},
    )

    def started() -> bool:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        return sock.exists()

    wait_until_sync(started, timeout=60, message="airlockd did not create its socket")
    return proc, sock


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    return err


def test_command_line_wins_over_the_config_file_and_json_logs(short_dir: Path) -> None:
    ws = short_dir / "ws"
    ws.mkdir()
    sock = short_dir / "d.sock"
    config = short_dir / "airlockd.toml"
    config.write_text(
        f'workspace = "{ws}"\nsocket = "{sock}"\nsocket-mode = "0600"\nlog_level = "ERROR"\n'
        'log-format = "text"\n'
    )
    proc, sock = _start_daemon(
        ["--config", str(config), "--socket-mode", "0640", "--log-level", "INFO",
         "--log-format", "json"],
        short_dir,
    )  # fmt: skip
    try:
        with contextlib.suppress(AssertionError):
            wait_until_sync(lambda: sock.stat().st_mode & 0o777 == 0o640)
        assert sock.stat().st_mode & 0o777 == 0o640, "the flag's mode, not the file's"
    finally:
        err = _stop(proc)
    records = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert records, "INFO (the flag) beat ERROR (the file): the start-up line is logged"
    assert any("serving" in r["message"] for r in records)
    assert all({"ts", "level", "logger", "message"} <= r.keys() for r in records)


def test_config_file_fills_in_what_the_command_line_left_out(short_dir: Path) -> None:
    ws = short_dir / "ws"
    ws.mkdir()
    config = short_dir / "airlockd.toml"
    config.write_text(
        f'workspace = "{ws}"\nsocket = "{short_dir / "d.sock"}"\nsocket-mode = "0600"\n'
    )
    proc, sock = _start_daemon(["--config", str(config)], short_dir)
    try:
        with contextlib.suppress(AssertionError):
            wait_until_sync(lambda: sock.stat().st_mode & 0o777 == 0o600)
        assert sock.stat().st_mode & 0o777 == 0o600
    finally:
        _stop(proc)


def test_proxy_configuration_errors_are_one_line(short_dir: Path) -> None:
    state = str(short_dir / "p")
    one_line_error(run("airlock-proxy", "--state-dir", state, "--log-level", "LOUD"), "--log-level")
    missing = run("airlock-proxy", "--state-dir", state, "--control-token-file", "/nonexistent/t")
    one_line_error(missing, "--control-token-file", "/nonexistent/t")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = run("airlock-proxy", "--state-dir", state, "--listen", f"127.0.0.1:{port}")
    one_line_error(taken, "--listen", str(port))
    assert not (short_dir / "p" / "control.sock").exists()


def test_airlock_tools_without_a_daemon_is_one_line(short_dir: Path) -> None:
    proc = run("airlock", "tools", "--socket", str(short_dir / "none.sock"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "is airlockd running" in lines[0], proc.stderr
    bad_flag = run("airlock", "tools", "--frobnicate")
    one_line_error(bad_flag, "--frobnicate")


def test_signed_commit_errors_can_be_json() -> None:
    proc = run("airlock-signed-commit", "--log-format", "json", "--repo", "x")
    assert proc.returncode == 2
    record = json.loads(proc.stderr.strip().splitlines()[-1])
    assert record["level"] == "ERROR" and record["logger"] == "airlock-signed-commit"
