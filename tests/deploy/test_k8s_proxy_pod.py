"""The Kubernetes proxy pod, played out without a cluster.

Takes the init container's script, the proxy's args and env, and the probe
commands straight from deploy/k8s/proxy.yaml, maps the pod's paths into a temp
dir laid out like the pod's volumes (a Secret volume of symlinks into ``..data``,
an emptyDir owned by root), and runs them as the pod's non-root uid: the init
container installs the provisioned CA, the real airlock-proxy starts with it
(loading, not re-creating, the CA), and the probes pass only with the token.
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

import pytest

from airlock.proxy import ca as proxy_ca
from airlock.proxy.config import DEFAULT_INTERCEPT
from tests.deploy.manifests import load_docs
from tests.deploy.pods import LocalPod
from tests.deploy.skips import need_pod_user
from tests.fakes.checkout import in_view
from tests.fakes.net import free_port as _free_port
from tests.fakes.processes import stop_process
from tests.fakes.wait import wait_until_sync

REPO = Path(__file__).resolve().parents[2]
CONTROL_GET = REPO / "deploy" / "docker" / "control-get.py"
PROXY_BIN = Path(sys.executable).with_name("airlock-proxy")
PYTHON = Path(sys.executable)
TOKEN = "k8s-control-token-" + "z" * 24


@dataclass
class Pod(LocalPod):
    spec: dict[str, Any]

    def container(self, name: str, init: bool = False) -> dict[str, Any]:
        key = "initContainers" if init else "containers"
        return next(c for c in self.spec[key] if c["name"] == name)

    def python_script(self, script: Path) -> list[str]:
        """The venv's Python running ``script``, both as the pod user sees them."""
        return [str(in_view(self.repo, PYTHON)), str(in_view(self.repo, script))]

    def as_pod_user(self, argv: list[str], **kw: Any) -> list[str]:
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", *argv]


@pytest.fixture
def pod(shared_repo: Path) -> Iterator[Pod]:
    need_pod_user("proxy pod")
    docs = load_docs(REPO / "deploy" / "k8s" / "proxy.yaml")
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    uid = spec["securityContext"]["runAsUser"]
    base = Path(tempfile.mkdtemp(prefix="al-k8s-"))
    base.chmod(0o755)
    try:
        # The Secret volume: files are symlinks into ..data, group-readable by fsGroup.
        generated = proxy_ca.load_or_create(base / "generated", DEFAULT_INTERCEPT)
        data = base / "ca-secret" / "..data"
        data.mkdir(parents=True)
        for src in (generated.cert_path, generated.key_path):
            shutil.copy(src, data / src.name)
            os.chown(data / src.name, 0, uid)
            (data / src.name).chmod(0o440)
            (base / "ca-secret" / src.name).symlink_to(Path("..data") / src.name)
        (base / "ca-secret").chmod(0o755)
        token_dir = base / "control-token"
        token_dir.mkdir()
        (token_dir / "token").write_text(TOKEN)
        os.chown(token_dir / "token", 0, uid)
        (token_dir / "token").chmod(0o440)
        token_dir.chmod(0o755)
        for empty in ("state", "audit", "tmp"):  # emptyDirs: root-owned, world-writable
            (base / empty).mkdir()
            (base / empty).chmod(0o777)
        paths = {
            "/ca-secret": str(base / "ca-secret"),
            "/var/lib/airlock-proxy": str(base / "state"),
            "/var/log/airlock-proxy": str(base / "audit"),
            "/etc/airlock-proxy/control": str(token_dir),
        }
        yield Pod(base=base, uid=uid, paths=paths, repo=shared_repo, spec=spec)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_init_container_installs_the_ca_and_the_proxy_serves_it_with_token_probes(
    pod: Pod,
) -> None:
    init = pod.container("install-ca", init=True)
    script = pod.map(init["args"][0])
    done = subprocess.run(
        pod.as_pod_user(["sh", "-c", script]), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr

    proxy = pod.container("proxy")
    args: list[str] = [pod.map(a) for a in proxy["args"]]
    state_dir = Path(args[args.index("--state-dir") + 1])
    assert (state_dir / "ca.key").stat().st_mode & 0o777 == 0o600
    assert state_dir.stat().st_uid == pod.uid
    control_port, listen_port = _free_port(), _free_port()
    args[args.index("--control") + 1] = f"tcp://127.0.0.1:{control_port}"
    args[args.index("--listen") + 1] = f"127.0.0.1:{listen_port}"
    args[args.index("--store") + 1] = "memory"  # Redis is another pod
    # Kubernetes expands $(VAR) in args from the env, here the Service link.
    args[args.index("--advertise") + 1] = args[args.index("--advertise") + 1].replace(
        "$(AIRLOCK_PROXY_SERVICE_HOST)", "10.96.0.10"
    )
    env = {e["name"]: pod.map(e["value"]) for e in proxy["env"]}
    env["AIRLOCK_CONTROL"] = env["AIRLOCK_CONTROL"].replace(":8081", f":{control_port}")
    run_env = {"PATH": os.environ["PATH"], "HOME": str(pod.base / "state"), **env}
    # The venv's editable install names the checkout's own path; the pod user imports the view.
    run_env["PYTHONPATH"] = str(pod.repo)
    log = (pod.base / "tmp" / "proxy.log").open("wb")
    process = subprocess.Popen(
        pod.as_pod_user([*pod.python_script(PROXY_BIN), *args]),
        env=run_env,
        stdout=log,
        stderr=log,
    )
    try:

        def probe(name: str) -> subprocess.CompletedProcess[str]:
            command = proxy[name]["exec"]["command"]
            assert command[0] == "airlock-control-get"
            return subprocess.run(
                pod.as_pod_user([*pod.python_script(CONTROL_GET), *command[1:]]),
                env=run_env,
                capture_output=True,
                text=True,
                check=False,
            )

        def started() -> bool:
            assert process.poll() is None, (pod.base / "tmp" / "proxy.log").read_text()
            return probe("startupProbe").returncode == 0

        wait_until_sync(started, timeout=30, message="startup probe never passed")
        assert probe("readinessProbe").returncode == 0
        assert probe("livenessProbe").returncode == 0

        served = subprocess.run(
            pod.as_pod_user([*pod.python_script(CONTROL_GET), "/v1/ca.pem"]),
            env=run_env,
            capture_output=True,
            check=True,
        )
        assert served.stdout == generated_cert(pod), "the provisioned CA was replaced"

        no_token = {k: v for k, v in run_env.items() if k != "AIRLOCK_CONTROL_TOKEN_FILE"}
        # Health is open to probes; the CA and everything else need the token.
        refused = subprocess.run(
            [sys.executable, str(CONTROL_GET), "/v1/ca.pem"],
            env=no_token,
            capture_output=True,
            text=True,
            check=False,
        )
        assert refused.returncode == 1 and "401" in refused.stderr
        assert (pod.base / "audit" / "audit.jsonl").exists()
    finally:
        stop_process(process)
        log.close()


def generated_cert(pod: Pod) -> bytes:
    return (pod.base / "generated" / "ca.pem").read_bytes()
