"""The sandbox image's entrypoint, run directly in a temp root with a fake proxy CA.

No container engine is needed: every path the script touches is an environment
variable, so the test points them into a temp dir, swaps update-ca-certificates
for a stand-in that rebuilds a temp bundle, and runs a probe command through the
entrypoint. The probe makes real TLS connections (curl, Python, node) to a local
server whose certificate chains to the fake CA, proving the variables the
entrypoint exports are the ones each stack reads.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from airlock.daemon.procfs import task_files
from tests.fakes.tls import TestCA
from tests.fakes.wait import wait_until_sync

ENTRYPOINT = Path("deploy") / "docker" / "sandbox-entrypoint.sh"  # inside the shared view
CA_VARS = (
    "SSL_CERT_FILE",
    "GIT_SSL_CAINFO",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
)

PROBE = r"""#!/bin/sh
# Reports who it runs as, the CA variables, and whether each TLS stack trusts the server.
url="$1"
curl_rc=0; curl -fsS -o /dev/null "$url" 2>/dev/null || curl_rc=$?
py_rc=0; /usr/bin/python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' "$url" 2>/dev/null || py_rc=$?
node_rc=skipped
if command -v node >/dev/null 2>&1; then
  node_rc=0
  node -e 'require("https").get(process.argv[1], r => process.exit(r.statusCode === 200 ? 0 : 2)).on("error", () => process.exit(1))' "$url" 2>/dev/null || node_rc=$?
fi
/usr/bin/python3 - "$curl_rc" "$py_rc" "$node_rc" <<'EOF'
import json, os, sys
keys = ("SSL_CERT_FILE", "GIT_SSL_CAINFO", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "HOME", "USER")
print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "curl": sys.argv[1], "python": sys.argv[2],
                  "node": sys.argv[3], "env": {k: os.environ.get(k) for k in keys}}))
EOF
"""

FAKE_UPDATE = """#!/bin/sh
# Stand-in for update-ca-certificates: system anchors + local anchors -> bundle.
cat "$FAKE_SYSTEM_ANCHORS" "$AIRLOCK_CA_ANCHOR_DIR"/*.crt > "$AIRLOCK_SYSTEM_BUNDLE"
"""


@dataclass
class Root:
    dir: Path
    entrypoint: Path
    ca: TestCA
    url: str
    env: dict[str, str]


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def root(shared_repo: Path) -> Iterator[Root]:
    # Outside tmp_path: the probe runs as `nobody`, which must traverse this dir.
    base = Path(tempfile.mkdtemp(prefix="al-ep-"))
    base.chmod(0o755)
    try:
        ca = TestCA(base / "ca")
        (base / "ca").chmod(0o755)
        leaf = ca.issue("localhost", "127.0.0.1")
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
        server.socket = leaf.server_context().wrap_socket(server.socket, server_side=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        etc = base / "etc" / "airlock"
        etc.mkdir(parents=True)
        shutil.copy(ca.ca_path, etc / "proxy-ca.pem")
        (etc / "proxy-ca.pem").chmod(0o644)
        # A "system" store that does not know the fake CA: trust must come from the entrypoint.
        system_anchors = base / "system-anchors.pem"
        system_anchors.write_text(Path(ssl.get_default_verify_paths().openssl_cafile).read_text())
        bundle = base / "ssl" / "ca-certificates.crt"
        bundle.parent.mkdir()
        shutil.copy(system_anchors, bundle)
        bundle.chmod(0o644)
        bundle.parent.chmod(0o755)
        update = base / "fake-update-ca-certificates"
        update.write_text(FAKE_UPDATE)
        update.chmod(0o755)
        probe = base / "probe.sh"
        probe.write_text(PROBE)
        probe.chmod(0o755)
        env = {k: v for k, v in os.environ.items() if k not in CA_VARS}
        env.update(
            AIRLOCK_PROXY_CA=str(etc / "proxy-ca.pem"),
            AIRLOCK_CA_ANCHOR_DIR=str(base / "anchors"),
            AIRLOCK_SYSTEM_BUNDLE=str(bundle),
            AIRLOCK_UPDATE_CA_CERTIFICATES=str(update),
            AIRLOCK_CA_BUNDLE_DIR=str(base / "bundle"),
            AIRLOCK_SOCKET_DIR=str(base / "run" / "airlock"),
            AIRLOCK_RUN_AS="nobody",
            FAKE_SYSTEM_ANCHORS=str(system_anchors),
        )
        yield Root(
            base,
            shared_repo / ENTRYPOINT,
            ca,
            f"https://localhost:{server.server_address[1]}/",
            env,
        )
        server.shutdown()
        server.server_close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run(
    root: Root, *argv: str, as_user: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    cmd = [str(root.entrypoint), *argv]
    if as_user:
        cmd = ["setpriv", f"--reuid={as_user}", "--regid=65534", "--clear-groups", *cmd]
    return subprocess.run(
        cmd, env={**root.env, **env}, capture_output=True, text=True, timeout=60, check=False
    )


def _probe(root: Root, *, as_user: str | None = None, **env: str) -> dict[str, object]:
    proc = _run(root, str(root.dir / "probe.sh"), root.url, as_user=as_user, **env)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_control_server_is_not_trusted_without_the_entrypoint(root: Root) -> None:
    """Sanity: the probe fails when run bare, so its successes below mean something."""
    proc = subprocess.run(
        [str(root.dir / "probe.sh"), root.url],
        env={
            **root.env,
            "SSL_CERT_FILE": root.env["FAKE_SYSTEM_ANCHORS"],
            "CURL_CA_BUNDLE": root.env["FAKE_SYSTEM_ANCHORS"],
        },
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(proc.stdout)
    assert result["curl"] != "0"
    assert result["python"] != "0"


def test_as_root_installs_into_system_store_and_drops_to_unprivileged_user(root: Root) -> None:
    result = _probe(root)
    nobody = 65534
    assert result["uid"] == nobody and result["gid"] == nobody
    env = result["env"]
    assert isinstance(env, dict)
    bundle = root.env["AIRLOCK_SYSTEM_BUNDLE"]
    for var in ("SSL_CERT_FILE", "GIT_SSL_CAINFO", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        assert env[var] == bundle
    assert env["NODE_EXTRA_CA_CERTS"] == str(root.dir / "anchors" / "airlock-proxy-ca.crt")
    assert (
        root.dir / "anchors" / "airlock-proxy-ca.crt"
    ).read_bytes() == root.ca.ca_path.read_bytes()
    assert result["curl"] == "0"
    assert result["python"] == "0"
    if shutil.which("node"):
        assert result["node"] == "0"
    sock_dir = root.dir / "run" / "airlock"
    assert sock_dir.stat().st_uid == nobody
    assert sock_dir.stat().st_mode & 0o777 == 0o750


def test_as_non_root_builds_a_private_bundle(root: Root) -> None:
    (root.dir / "run").mkdir(mode=0o777)
    (root.dir / "run").chmod(0o777)
    (root.dir / "bundle").mkdir(mode=0o777)
    (root.dir / "bundle").chmod(0o777)
    result = _probe(root, as_user="nobody")
    assert result["uid"] == 65534
    env = result["env"]
    assert isinstance(env, dict)
    private = str(root.dir / "bundle" / "ca-bundle.pem")
    assert env["SSL_CERT_FILE"] == env["GIT_SSL_CAINFO"] == env["CURL_CA_BUNDLE"] == private
    assert env["NODE_EXTRA_CA_CERTS"] == str(root.dir / "bundle" / "proxy-ca.pem")
    assert result["curl"] == "0" and result["python"] == "0"
    # The system bundle was left alone (it is not ours to write as non-root).
    assert root.ca.ca_path.read_text() not in Path(root.env["AIRLOCK_SYSTEM_BUNDLE"]).read_text()


def test_missing_ca_fails_closed(root: Root) -> None:
    proc = _run(root, "true", AIRLOCK_PROXY_CA=str(root.dir / "nope.pem"))
    assert proc.returncode == 78
    assert "no proxy CA" in proc.stderr


def test_missing_ca_allowed_only_when_explicitly_optional(root: Root) -> None:
    result = _probe(root, AIRLOCK_PROXY_CA=str(root.dir / "nope.pem"), AIRLOCK_REQUIRE_PROXY_CA="0")
    env = result["env"]
    assert isinstance(env, dict)
    assert env["SSL_CERT_FILE"] is None
    assert result["curl"] != "0"


def test_a_ca_file_carrying_a_private_key_is_refused(root: Root) -> None:
    bad = root.dir / "with-key.pem"
    leaf = root.ca.issue("leaky.example")
    bad.write_bytes(root.ca.ca_path.read_bytes() + leaf.key_path.read_bytes())
    proc = _run(root, "true", AIRLOCK_PROXY_CA=str(bad))
    assert proc.returncode == 78
    assert "private key" in proc.stderr
    assert not (root.dir / "anchors" / "airlock-proxy-ca.crt").exists()


def test_a_non_pem_ca_is_refused(root: Root) -> None:
    bad = root.dir / "junk.pem"
    bad.write_text("hello\n")
    proc = _run(root, "true", AIRLOCK_PROXY_CA=str(bad))
    assert proc.returncode == 78
    assert "not a PEM certificate" in proc.stderr


@pytest.mark.parametrize("run_as", ["", "root"])
def test_refuses_to_run_the_daemon_as_root(root: Root, run_as: str) -> None:
    proc = _run(root, "true", AIRLOCK_RUN_AS=run_as)
    assert proc.returncode == 78
    assert "root" in proc.stderr


def test_default_command_is_airlockd_on_the_shared_socket(root: Root, tmp_path: Path) -> None:
    """With no arguments it execs airlockd; a stub on PATH records the argv it got."""
    bindir = root.dir / "bin"
    bindir.mkdir()
    bindir.chmod(0o755)
    out = root.dir / "argv.txt"
    stub = bindir / "airlockd"
    stub.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {out}\n')
    stub.chmod(0o755)
    root.dir.chmod(0o777)
    proc = _run(root, PATH=f"{bindir}:{os.environ['PATH']}", AIRLOCK_WORKSPACE="/srv/ws")
    assert proc.returncode == 0, proc.stderr
    sock = str(root.dir / "run" / "airlock" / "airlockd.sock")
    assert out.read_text().split("\n")[:4] == ["--workspace", "/srv/ws", "--socket", sock]
    assert out.stat().st_uid == 65534


def test_a_rotation_bundle_of_two_cas_trusts_both(root: Root) -> None:
    """During CA rotation proxy-ca.pem holds the old and the new certificate."""
    old = TestCA(root.dir / "old-ca")
    ca_file = Path(root.env["AIRLOCK_PROXY_CA"])
    ca_file.write_bytes(old.ca_path.read_bytes() + root.ca.ca_path.read_bytes())
    result = _probe(root)
    assert result["curl"] == "0" and result["python"] == "0"
    bundle = Path(root.env["AIRLOCK_SYSTEM_BUNDLE"]).read_text()
    assert old.ca_path.read_text() in bundle and root.ca.ca_path.read_text() in bundle


def _child_named(pid: int, name: str) -> bool:
    children = [int(c) for _, data in task_files(pid, "children") for c in data.split()]
    return any(data.strip() == name.encode() for c in children for _, data in task_files(c, "comm"))


def test_waits_for_a_ca_that_arrives_late(root: Root) -> None:
    """compose's ca-export may finish after the sandbox starts: AIRLOCK_PROXY_CA_WAIT_S."""
    late = root.dir / "late" / "proxy-ca.pem"
    late.parent.mkdir()
    env = {**root.env, "AIRLOCK_PROXY_CA": str(late), "AIRLOCK_PROXY_CA_WAIT_S": "20"}
    proc = subprocess.Popen(
        [str(root.entrypoint), "sh", "-c", 'echo "$SSL_CERT_FILE"'],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Its wait loop runs `sleep 1` as a child while the CA is missing.
    wait_until_sync(
        lambda: proc.poll() is not None or _child_named(proc.pid, "sleep"),
        message="the entrypoint never entered its wait loop",
    )
    assert proc.poll() is None, "it must still be waiting"
    shutil.copy(root.ca.ca_path, late)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.strip() == root.env["AIRLOCK_SYSTEM_BUNDLE"]


FAKE_AIRLOCKD = """#!/bin/sh
# Stands in for airlockd: advertises --exec-user (or not) and reports who runs it.
if [ "$1" = "--help" ]; then
  [ -n "$FAKE_NO_EXEC_USER" ] || echo "  --exec-user USER[:GROUP]"
  exit 0
fi
echo "uid=$(id -u) gid=$(id -g) groups=$(id -G) args=$*"
"""


def _fake_airlockd(root: Root) -> dict[str, str]:
    bin_dir = root.dir / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "airlockd"
    fake.write_text(FAKE_AIRLOCKD)
    fake.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "AIRLOCK_WORKSPACE": str(root.dir)}


def test_default_command_switches_users_through_airlockd_as_root(root: Root) -> None:
    """With AIRLOCK_EXEC_USER the daemon keeps uid 0 (group of AIRLOCK_RUN_AS) and
    gets --exec-user; the agent's commands are airlockd's to demote."""
    if os.geteuid() != 0:
        pytest.fail("the entrypoint tests run as root (CI and the dev machines are root)")
    env = _fake_airlockd(root)
    done = _run(root, AIRLOCK_EXEC_USER="nobody", **env)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith("uid=0 gid=65534 groups=65534 "), line
    assert line.endswith("--exec-user nobody"), line
    sock_dir = Path(root.env["AIRLOCK_SOCKET_DIR"])
    assert (sock_dir.stat().st_uid, sock_dir.stat().st_gid) == (0, 65534)
    assert sock_dir.stat().st_mode & 0o777 == 0o750


def test_exec_user_root_is_refused_and_an_old_daemon_falls_back(root: Root) -> None:
    env = _fake_airlockd(root)
    refused = _run(root, AIRLOCK_EXEC_USER="root", **env)
    assert refused.returncode == 78 and "is root" in refused.stderr
    old = _run(root, AIRLOCK_EXEC_USER="nobody", FAKE_NO_EXEC_USER="1", **env)
    assert old.returncode == 0, old.stderr
    assert "has no --exec-user" in old.stderr
    assert old.stdout.startswith("uid=65534 "), "without the flag it drops to AIRLOCK_RUN_AS"
    assert "--exec-user" not in old.stdout
