"""deploy/k8s: every document is a valid object of its kind, and the manifests say
what the deployment contract says (2+ proxy replicas on Redis, health probes,
sandboxes reach only the proxy, the control API only from the orchestrator)."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.manifests import Cluster, Doc, External, Pod, load_docs, validation_errors
from tests.deploy.skips import program_or_skip

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
KUSTOMIZATION = "kustomization.yaml"

SANDBOX = Pod("airlock-sandboxes", {"app.kubernetes.io/name": "airlock-sandbox"})
OTHER_SANDBOX = Pod("airlock-sandboxes", {"app.kubernetes.io/name": "airlock-sandbox", "x": "2"})
PROXY = Pod("airlock", {"app.kubernetes.io/name": "airlock-proxy"})
REDIS = Pod("airlock", {"app.kubernetes.io/name": "airlock-redis"})
ORCHESTRATOR = Pod("airlock-orchestrator", {"app": "orchestrator"})
STRANGER = Pod("default", {"app": "web"})
KUBE_DNS = Pod("kube-system", {"k8s-app": "kube-dns"})
GITHUB = External("140.82.112.3")
METADATA = External("169.254.169.254")
PRIVATE = External("10.1.2.3")


def manifest_files() -> list[Path]:
    return sorted(p for p in K8S.glob("*.yaml") if p.name != KUSTOMIZATION)


def all_docs() -> list[Doc]:
    return [doc for path in manifest_files() for doc in load_docs(path)]


def find(kind: str, name: str, namespace: str | None = None) -> Doc:
    for doc in all_docs():
        meta = doc["metadata"]
        if doc["kind"] == kind and meta["name"] == name and meta.get("namespace") == namespace:
            return doc
    raise AssertionError(f"no {kind} {namespace}/{name}")


def cluster() -> Cluster:
    namespaces = {
        d["metadata"]["name"]: dict(d["metadata"].get("labels") or {})
        for d in all_docs()
        if d["kind"] == "Namespace"
    }
    namespaces.setdefault("default", {})
    namespaces.setdefault("kube-system", {})
    return Cluster(namespaces, [d for d in all_docs() if d["kind"] == "NetworkPolicy"])


def container(pod_spec: Doc, name: str) -> Doc:
    for c in pod_spec["containers"]:
        if c["name"] == name:
            return dict(c)
    raise AssertionError(f"no container {name}")


def arg_value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


# --- structure ----------------------------------------------------------------


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: p.name)
def test_every_document_deserialises_strictly_into_its_model(path: Path) -> None:
    docs = load_docs(path)
    assert docs, f"{path.name} is empty"
    for doc in docs:
        assert validation_errors(doc) == [], f"{path.name}: {doc['kind']} {doc['metadata']['name']}"
        assert (
            doc["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") == "airlock"
            or doc["kind"] == "NetworkPolicy"
        )


def test_the_validator_rejects_unknown_and_missing_fields() -> None:
    """Guards the check above: a typo or a dropped required field must be caught."""
    deployment = find("Deployment", "airlock-proxy", "airlock")
    typo = copy.deepcopy(deployment)
    typo["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    assert any("readinesProbe" in e for e in validation_errors(typo))
    missing = copy.deepcopy(deployment)
    del missing["spec"]["template"]["spec"]["containers"][0]["name"]
    assert any("name" in e for e in validation_errors(missing))
    policy = copy.deepcopy(find("NetworkPolicy", "sandbox-only-proxy", "airlock-sandboxes"))
    policy["spec"]["egress"][0]["to"][0]["podSelectr"] = {}
    assert validation_errors(policy)


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((K8S / KUSTOMIZATION).read_text())
    assert sorted(kustomization["resources"]) == [p.name for p in manifest_files()]
    names = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in all_docs()]
    assert len(names) == len(set(names)), "duplicate objects"


def test_kubectl_kustomize_builds_offline() -> None:
    kubectl = program_or_skip(
        "kubectl",
        "kubectl is not installed (scripts/install-system-deps.sh installs it): the "
        "offline kustomize build did not run; it is NOT a pass",
    )
    out = subprocess.run(
        [kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=60, check=True
    )
    built = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert len(built) == len(all_docs())


# --- proxy ----------------------------------------------------------------------


def test_proxy_deployment_runs_two_replicas_on_the_redis_store() -> None:
    deployment = find("Deployment", "airlock-proxy", "airlock")
    spec = deployment["spec"]
    assert spec["replicas"] >= 2
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod = spec["template"]["spec"]
    proxy = container(pod, "proxy")
    store = arg_value(proxy["args"], "--store")
    assert store.startswith("redis://airlock-redis.")
    redis_service = find("Service", "airlock-redis", "airlock")
    assert redis_service["spec"]["ports"][0]["port"] == int(store.rsplit(":", 1)[1].split("/")[0])
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert proxy["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["automountServiceAccountToken"] is False
    pdb = find("PodDisruptionBudget", "airlock-proxy", "airlock")
    assert pdb["spec"]["minAvailable"] >= 1


def test_proxy_probes_hit_the_health_route_on_the_control_port() -> None:
    pod = find("Deployment", "airlock-proxy", "airlock")["spec"]["template"]["spec"]
    proxy = container(pod, "proxy")
    ports = {p["name"]: p["containerPort"] for p in proxy["ports"]}
    control = arg_value(proxy["args"], "--control")
    assert control.startswith("tcp://") and int(control.rsplit(":", 1)[1]) == ports["control"]
    token_file = arg_value(proxy["args"], "--control-token-file")
    listen = arg_value(proxy["args"], "--listen")
    assert int(listen.rsplit(":", 1)[1]) == ports["proxy"]
    # The probes run airlock-control-get in the pod (the TCP control API wants the
    # token on every route); its endpoint and token come from the environment.
    env = {e["name"]: e["value"] for e in proxy["env"]}
    assert env["AIRLOCK_CONTROL"] == f"tcp://127.0.0.1:{ports['control']}"
    assert env["AIRLOCK_CONTROL_TOKEN_FILE"] == token_file
    mounts = [m["mountPath"] for m in proxy["volumeMounts"]]
    assert any(token_file.startswith(m + "/") for m in mounts)
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        command = proxy[probe]["exec"]["command"]
        assert command[0] == "airlock-control-get", probe
        assert command[-1] == "/v1/health", probe
    assert "--any-status" not in proxy["readinessProbe"]["exec"]["command"]
    assert "--any-status" in proxy["livenessProbe"]["exec"]["command"]


def test_proxy_advertises_the_service_address_sandboxes_can_reach() -> None:
    pod = find("Deployment", "airlock-proxy", "airlock")["spec"]["template"]["spec"]
    advertise = arg_value(container(pod, "proxy")["args"], "--advertise")
    assert advertise == "$(AIRLOCK_PROXY_SERVICE_HOST):8080"
    assert pod["enableServiceLinks"] is True
    assert find("Service", "airlock-proxy", "airlock")["spec"]["ports"][0]["port"] == 8080


def test_proxy_services_select_the_proxy_pods() -> None:
    labels = find("Deployment", "airlock-proxy", "airlock")["spec"]["template"]["metadata"][
        "labels"
    ]
    for name, port in (("airlock-proxy", 8080), ("airlock-proxy-control", 8081)):
        service = find("Service", name, "airlock")
        assert all(labels.get(k) == v for k, v in service["spec"]["selector"].items())
        assert [p["port"] for p in service["spec"]["ports"]] == [port]


def test_proxy_ca_comes_from_a_secret_shared_by_all_replicas() -> None:
    pod = find("Deployment", "airlock-proxy", "airlock")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["ca-secret"]["secret"]["secretName"] == "airlock-proxy-ca"
    init = pod["initContainers"][0]
    state_dir = arg_value(container(pod, "proxy")["args"], "--state-dir")
    # The state dir is a subdirectory of the volume, created by the init container
    # (running as the proxy's user), so the proxy owns it and may chmod it 0700.
    mount = {m["mountPath"]: m["name"] for m in init["volumeMounts"]}
    assert mount["/ca-secret"] == "ca-secret"
    volume_root = state_dir.rsplit("/", 1)[0]
    assert mount[volume_root] == "state"
    assert f"mkdir -p {state_dir}" in init["args"][0]
    assert f'cp -L "$f" {state_dir}/' in init["args"][0]
    proxy_mounts = {m["mountPath"]: m["name"] for m in container(pod, "proxy")["volumeMounts"]}
    assert proxy_mounts[volume_root] == "state"


# --- sandbox ----------------------------------------------------------------------


def sandbox_template() -> Doc:
    template: Doc = find("PodTemplate", "airlock-sandbox", "airlock-sandboxes")["template"]
    return template


def test_sandbox_template_runs_airlockd_with_a_token_and_health_probes() -> None:
    template = sandbox_template()
    assert template["metadata"]["labels"] == {
        **SANDBOX.labels,
        "app.kubernetes.io/part-of": "airlock",
    }
    spec = template["spec"]
    sandbox = container(spec, "sandbox")
    args: list[str] = sandbox["args"]
    assert args[0] == "airlockd"
    assert "--workspace" in args and "--socket" in args
    listen = arg_value(args, "--listen")
    assert listen.startswith("tcp://")
    assert "--token-file" in args, "a TCP daemon listener needs a token"
    ports = {p["name"]: p["containerPort"] for p in sandbox["ports"]}
    assert int(listen.rsplit(":", 1)[1]) == ports["daemon"]
    # The crash journal lives beside the socket (no --state-dir): on a volume that
    # survives a container restart, and the pod restarts the container.
    assert "--state-dir" not in args
    socket_dir = arg_value(args, "--socket").rsplit("/", 1)[0]
    volumes = {v["name"]: v for v in spec["volumes"]}
    run_mount = next(m for m in sandbox["volumeMounts"] if m["mountPath"] == socket_dir)
    assert "emptyDir" in volumes[run_mount["name"]]
    assert spec["restartPolicy"] == "OnFailure"
    for probe in ("readinessProbe", "livenessProbe"):
        assert sandbox[probe]["httpGet"] == {"path": "/v1/health", "port": "daemon"}


def test_sandbox_is_unprivileged_and_has_no_cluster_credentials_or_dns() -> None:
    spec: dict[str, Any] = sandbox_template()["spec"]
    sandbox = container(spec, "sandbox")
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    assert sandbox["securityContext"]["allowPrivilegeEscalation"] is False
    assert sandbox["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False
    assert spec["dnsPolicy"] == "None"
    assert spec["dnsConfig"]["nameservers"] == ["127.0.0.1"]


def test_sandbox_gets_the_proxy_ca_from_the_configmap_at_the_entrypoint_path() -> None:
    spec = sandbox_template()["spec"]
    sandbox = container(spec, "sandbox")
    mounts = {m["name"]: m for m in sandbox["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    ca_volume = volumes["proxy-ca"]["configMap"]
    assert ca_volume["name"] == "airlock-proxy-ca"
    assert mounts["proxy-ca"]["mountPath"] == "/etc/airlock"
    assert mounts["proxy-ca"]["readOnly"] is True
    assert ca_volume["items"] == [{"key": "proxy-ca.pem", "path": "proxy-ca.pem"}]
    configmap = find("ConfigMap", "airlock-proxy-ca", "airlock-sandboxes")
    # The shipped value is deliberately not a certificate: the entrypoint refuses
    # to start until the operator installs the real CA.
    assert "BEGIN CERTIFICATE" not in configmap["data"]["proxy-ca.pem"]
    # A read-only root needs the private-bundle dir to be writable.
    env = {e["name"]: e["value"] for e in sandbox["env"]}
    assert env["AIRLOCK_CA_BUNDLE_DIR"] in {m["mountPath"] for m in sandbox["volumeMounts"]}
    assert sandbox["securityContext"]["readOnlyRootFilesystem"] is True


# --- network policy ----------------------------------------------------------------


def test_sandbox_pods_reach_only_the_proxy_port() -> None:
    c = cluster()
    assert c.allowed(SANDBOX, PROXY, 8080)
    assert not c.allowed(SANDBOX, PROXY, 8081), "sandbox must not reach the control API"
    assert not c.allowed(SANDBOX, REDIS, 6379)
    assert not c.allowed(SANDBOX, KUBE_DNS, 53, "UDP")
    assert not c.allowed(SANDBOX, GITHUB, 443)
    assert not c.allowed(SANDBOX, METADATA, 80)
    assert not c.allowed(SANDBOX, OTHER_SANDBOX, 7070)
    assert not c.allowed(SANDBOX, ORCHESTRATOR, 443)


def test_control_api_and_daemons_only_from_the_orchestrator_namespace() -> None:
    c = cluster()
    assert c.allowed(ORCHESTRATOR, PROXY, 8081)
    assert not c.allowed(STRANGER, PROXY, 8081)
    assert not c.allowed(REDIS, PROXY, 8081)
    assert c.allowed(ORCHESTRATOR, SANDBOX, 7070)
    assert not c.allowed(STRANGER, SANDBOX, 7070)
    assert not c.allowed(PROXY, SANDBOX, 7070)
    assert not c.allowed(STRANGER, PROXY, 8080), "only sandboxes use the proxy"


def test_proxy_reaches_redis_dns_and_public_https_only() -> None:
    c = cluster()
    assert c.allowed(PROXY, REDIS, 6379)
    assert not c.allowed(STRANGER, REDIS, 6379)
    assert not c.allowed(SANDBOX, REDIS, 6379)
    assert c.allowed(PROXY, KUBE_DNS, 53, "UDP")
    assert c.allowed(PROXY, GITHUB, 443)
    assert not c.allowed(PROXY, METADATA, 80)
    assert not c.allowed(PROXY, PRIVATE, 443)
    assert not c.allowed(PROXY, GITHUB, 22)
    assert not c.allowed(PROXY, SANDBOX, 7070)


def test_the_evaluator_notices_a_widened_policy() -> None:
    """Guards the checks above: dropping the proxy selector must open the sandbox up."""
    c = cluster()
    assert not c.egress_allowed(SANDBOX, REDIS, 6379)
    for policy in c.policies:
        if policy["metadata"]["name"] == "sandbox-only-proxy":
            policy["spec"]["egress"][0]["to"][0].pop("podSelector")
            policy["spec"]["egress"][0].pop("ports")
    assert c.egress_allowed(SANDBOX, REDIS, 6379)
    assert not c.allowed(SANDBOX, REDIS, 6379), "Redis's own ingress policy is the second lock"
