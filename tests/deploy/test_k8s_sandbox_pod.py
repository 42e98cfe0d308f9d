"""The Kubernetes sandbox pod, played out without a cluster.

The PodTemplate's args and env, the image's entrypoint and the volume layout
(ConfigMap CA at /etc/airlock, token Secret, emptyDirs) are mapped into a temp
dir and run as the template's non-root uid, so the entrypoint takes its
non-root path (private CA bundle). Checks: the placeholder ConfigMap shipped in
sandbox.yaml stops the pod (fail closed); with a real CA, airlockd serves its
TCP listener, the httpGet probe path answers without a token, everything else
needs it, and commands run as the pod user with the CA variables set.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.deploy.manifests import load_docs
from tests.deploy.pods import LocalPod
from tests.deploy.skips import need_pod_user
from tests.fakes.checkout import in_view
from tests.fakes.net import free_port as _free_port
from tests.fakes.processes import stop_process
from tests.fakes.tls import TestCA
from tests.fakes.wait import wait_until

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = Path("deploy") / "docker" / "sandbox-entrypoint.sh"  # inside the shared view
TOKEN = "sandbox-daemon-token-" + "q" * 20
# ENV of the sandbox image (Dockerfile) that the template relies on.
IMAGE_ENV = {"AIRLOCK_PROXY_CA": "/etc/airlock/proxy-ca.pem", "AIRLOCK_SOCKET_DIR": "/run/airlock"}


def _system_python() -> str:
    """airlockd for the pod user: the system Python with the venv's packages.

    The test interpreter may live under /root (pyenv), which the pod's uid cannot
    traverse; the image has its own Python, so this only stands in for it.
    """
    python = "/usr/bin/python3"
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if os.access(python, os.X_OK):
        probe = subprocess.run(
            [python, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.stdout.strip() == mine:
            return python
    pytest.skip(
        f"needs /usr/bin/python3 {mine} (the venv's minor version) for the pod user: the "
        "sandbox pod checks did not run; it is NOT a pass"
    )


@dataclass
class SandboxPod(LocalPod):
    container: dict[str, Any]
    template: dict[str, Any]


@pytest.fixture
def sandbox_pod(shared_repo: Path) -> Iterator[SandboxPod]:
    need_pod_user("sandbox pod")
    docs = load_docs(REPO / "deploy" / "k8s" / "sandbox.yaml")
    template = next(d for d in docs if d["kind"] == "PodTemplate")["template"]
    spec = template["spec"]
    uid = spec["securityContext"]["runAsUser"]
    container = next(c for c in spec["containers"] if c["name"] == "sandbox")
    base = Path(tempfile.mkdtemp(prefix="al-sbx-"))
    base.chmod(0o755)
    try:
        paths: dict[str, str] = {}
        for mount in container["volumeMounts"]:
            local = base / mount["name"]
            local.mkdir()
            local.chmod(0o555 if mount.get("readOnly") else 0o777)
            paths[mount["mountPath"]] = str(local)
        yield SandboxPod(
            base=base,
            uid=uid,
            paths=paths,
            repo=shared_repo,
            container=container,
            template=template,
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _env(pod: SandboxPod, port: int) -> tuple[list[str], dict[str, str]]:
    args = [pod.map(a) for a in pod.container["args"]]
    assert args[0] == "airlockd"
    args[:1] = [_system_python(), "-m", "airlock.daemon.cli"]
    args[args.index("--listen") + 1] = f"tcp://127.0.0.1:{port}"
    site = next(Path(sys.prefix, "lib").glob("python3*/site-packages"))
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": f"{pod.repo}:{in_view(pod.repo, site)}",
        **{k: pod.map(v) for k, v in IMAGE_ENV.items()},
        **{e["name"]: pod.map(e["value"]) for e in pod.container["env"]},
    }
    return args, env


def _write_volume_file(pod: SandboxPod, mount_path: str, name: str, data: bytes) -> None:
    directory = Path(pod.paths[mount_path])
    directory.chmod(0o755)
    (directory / name).write_bytes(data)
    os.chown(directory / name, 0, pod.uid)
    (directory / name).chmod(0o440)


def _start(pod: SandboxPod, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    cmd = ["setpriv", f"--reuid={pod.uid}", f"--regid={pod.uid}", "--clear-groups"]
    return subprocess.Popen(
        [*cmd, str(pod.repo / ENTRYPOINT), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=pod.base,
    )


def test_the_shipped_placeholder_ca_keeps_the_pod_from_starting(sandbox_pod: SandboxPod) -> None:
    pod = sandbox_pod
    configmap = next(
        d for d in load_docs(REPO / "deploy" / "k8s" / "sandbox.yaml") if d["kind"] == "ConfigMap"
    )
    _write_volume_file(
        pod, "/etc/airlock", "proxy-ca.pem", configmap["data"]["proxy-ca.pem"].encode()
    )
    args, env = _env(pod, _free_port())
    proc = _start(pod, args, env)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 78
    assert b"not a PEM certificate" in out


async def test_airlockd_serves_the_template_as_the_pod_user(
    sandbox_pod: SandboxPod, tmp_path: Path
) -> None:
    pod = sandbox_pod
    ca = TestCA(tmp_path / "ca")
    _write_volume_file(pod, "/etc/airlock", "proxy-ca.pem", ca.ca_path.read_bytes())
    _write_volume_file(pod, "/etc/airlockd", "tokens", f"{TOKEN} write\n".encode())
    port = _free_port()
    args, env = _env(pod, port)
    proc = _start(pod, args, env)
    url = f"http://127.0.0.1:{port}"
    probe = pod.container["readinessProbe"]["httpGet"]["path"]
    try:
        async with aiohttp.ClientSession() as http:

            async def ready() -> bool:
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else b""
                try:
                    async with http.get(url + probe) as resp:
                        return resp.status == 200
                except aiohttp.ClientError:
                    return False

            await wait_until(ready, timeout=30, message="the readiness probe never passed")
            async with http.get(url + "/v1/tools") as resp:
                assert resp.status == 401, "only the health route is open on TCP"
            headers = {"Authorization": f"Bearer {TOKEN}"}
            body = {
                "argv": ["sh", "-c", 'id -u; echo "$SSL_CERT_FILE"; echo "$NODE_EXTRA_CA_CERTS"']
            }
            async with http.post(url + "/v1/tools/exec", json=body, headers=headers) as resp:
                assert resp.status == 200, await resp.text()
                result = await resp.json()
    finally:
        stop_process(proc)
    uid, cert_file, node_extra = result["stdout"].split("\n")[:3]
    bundle_dir = env["AIRLOCK_CA_BUNDLE_DIR"]
    assert uid == str(pod.uid)
    assert cert_file == f"{bundle_dir}/ca-bundle.pem"
    assert node_extra == f"{bundle_dir}/proxy-ca.pem"
    assert ca.ca_path.read_text() in Path(cert_file).read_text()
    socket_path = Path(args[args.index("--socket") + 1])
    assert socket_path.parent == Path(pod.paths["/run/airlock"])
