"""deploy/compose.yaml and the Dockerfile, checked statically (no container engine
here): the topology the issue describes, and that the Dockerfile's stages, copies
and users are what the compose file and the docs rely on."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.skips import program_or_skip

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "deploy" / "compose.yaml"
DOCKERFILE = REPO / "Dockerfile"
PROXIES = ("proxy-a", "proxy-b")


def interpolate(text: str) -> str:
    """Compose's ``${VAR:-default}`` with every variable unset (the defaults)."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", text)


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(interpolate(COMPOSE.read_text()))
    return data


def service(name: str) -> dict[str, Any]:
    svc: dict[str, Any] = compose()["services"][name]
    return svc


def networks_of(svc: dict[str, Any]) -> list[str]:
    nets = svc.get("networks", [])
    return list(nets) if isinstance(nets, dict | list) else []


def volumes_of(svc: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(source, target, mode) for short-syntax volume entries."""
    out = []
    for entry in svc.get("volumes", []):
        parts = entry.split(":")
        out.append((parts[0], parts[1], parts[2] if len(parts) > 2 else "rw"))
    return out


def arg(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def dockerfile_stages() -> dict[str, list[str]]:
    """Stage name -> its instructions (continuation lines joined, comments dropped)."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    stages: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line, re.IGNORECASE)
        if match:
            current = stages.setdefault(match.group(1), [])
        if current is not None:
            current.append(line)
    return stages


# --- compose ----------------------------------------------------------------------


def test_compose_has_the_issue_services() -> None:
    services = compose()["services"]
    for name in ("redis", *PROXIES, "sandbox", "orchestrator", "ca-export"):
        assert name in services, name
    assert compose()["services"]["orchestrator"]["profiles"] == ["example"]


def test_sandbox_is_only_on_internal_networks_and_publishes_nothing() -> None:
    nets = compose()["networks"]
    sandbox = service("sandbox")
    assert networks_of(sandbox), "the sandbox must be on a network (the proxy's)"
    for net in networks_of(sandbox):
        assert nets[net].get("internal") is True, net
    assert "ports" not in sandbox and "network_mode" not in sandbox
    assert "extra_hosts" not in sandbox


def test_the_proxies_are_the_sandbox_networks_only_other_members_with_a_way_out() -> None:
    nets = compose()["networks"]
    sandbox_nets = set(networks_of(service("sandbox")))
    for name, svc in compose()["services"].items():
        if name == "sandbox" or not sandbox_nets & set(networks_of(svc)):
            continue
        assert name in PROXIES, f"{name} shares a network with the sandbox"
    for proxy in PROXIES:
        svc = service(proxy)
        assert any(not nets[n].get("internal") for n in networks_of(svc)), "proxy needs egress"


def test_two_proxy_replicas_behind_one_name_on_the_redis_store() -> None:
    for proxy in PROXIES:
        svc = service(proxy)
        sandbox_net = svc["networks"]["sandbox"]
        assert sandbox_net["aliases"] == ["proxy"]
        assert arg(svc["command"], "--store") == "redis://redis:6379/0"
        assert arg(svc["command"], "--listen").endswith(":8080")
        assert arg(svc["command"], "--control").startswith("unix:")
        assert svc.get("user") in (None, ""), "proxies run as the image's non-root user"
        assert svc["read_only"] is True and svc["cap_drop"] == ["ALL"]
    controls = {arg(service(p)["command"], "--control") for p in PROXIES}
    assert len(controls) == 2
    assert service("proxy-b")["depends_on"]["proxy-a"]["condition"] == "service_healthy"
    assert set(networks_of(service("redis"))) <= {
        n for n, v in compose()["networks"].items() if v.get("internal")
    }


def test_daemon_socket_is_shared_with_the_host_through_a_bind_mount() -> None:
    binds = [(s, t) for s, t, _ in volumes_of(service("sandbox")) if s.startswith("./")]
    assert ("./run/sandbox", "/run/airlock") in binds
    orchestrator = service("orchestrator")
    env = orchestrator["environment"]
    assert env["AIRLOCK_DAEMON_SOCKET"] == "/run/airlock-host/sandbox/airlockd.sock"
    assert ("./run", "/run/airlock-host", "rw") in volumes_of(orchestrator)


def test_sandbox_gets_the_public_ca_and_never_the_proxy_state() -> None:
    sandbox_vols = volumes_of(service("sandbox"))
    assert ("proxy-ca", "/etc/airlock", "ro") in sandbox_vols
    sources = {s for s, _, _ in sandbox_vols}
    assert "proxy-state" not in sources, "the CA key lives in proxy-state"
    assert "./run/proxy" not in sources and "./run" not in sources, "control sockets stay out"
    export = service("ca-export")
    assert export["command"][-1] == "/v1/ca.pem"
    assert arg(export["command"], "-o") == "/proxy-ca/proxy-ca.pem"
    assert ("proxy-ca", "/proxy-ca", "rw") in volumes_of(export)
    # The file lands where the sandbox entrypoint looks by default.
    dockerfile = DOCKERFILE.read_text()
    assert "AIRLOCK_PROXY_CA=/etc/airlock/proxy-ca.pem" in dockerfile
    assert service("sandbox")["depends_on"]["ca-export"]["condition"] == (
        "service_completed_successfully"
    )


def test_compose_builds_only_targets_the_dockerfile_defines() -> None:
    stages = dockerfile_stages()
    for name, svc in compose()["services"].items():
        build = svc.get("build")
        if build:
            assert build["target"] in stages, name
            assert (COMPOSE.parent / build["context"] / "Dockerfile").resolve() == DOCKERFILE


def test_docker_compose_v1_config_validates(tmp_path: Path) -> None:
    """Debian's docker-compose 1.29 (installed by `make test`) accepts the file."""
    v1 = shutil.which("docker-compose")
    assert v1, "docker-compose missing: scripts/install-system-deps.sh installs it"

    def config(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [v1, "-f", str(path), "config", "-q"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
        )

    proc = config(COMPOSE)
    assert proc.returncode == 0, proc.stderr
    broken = tmp_path / "compose.yaml"
    broken.write_text("name: airlock\n" + COMPOSE.read_text())
    assert config(broken).returncode != 0, "the v1 check must reject a top-level name:"


def test_docker_compose_config_validates() -> None:
    docker = program_or_skip(
        "docker",
        "docker CLI not installed (scripts/install-system-deps.sh --with-images installs "
        "it): `docker compose config` did not run; it is NOT a pass",
    )
    has_compose = subprocess.run([docker, "compose", "version"], capture_output=True, check=False)
    if has_compose.returncode != 0:
        pytest.skip(
            "compose v2 (`docker compose` plugin) is not installed, and Debian does not package "
            "it (only compose v1, which test_docker_compose_v1_config_validates checks): the v2 "
            "validation did not run; it is NOT a pass"
        )
    engine = subprocess.run([docker, "info"], capture_output=True, timeout=30, check=False)
    if engine.returncode != 0:
        pytest.skip(
            "no Docker engine reachable (start one: scripts/dockerd.sh start): "
            "`docker compose config` did not run; it is NOT a pass"
        )
    proc = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


# --- Dockerfile --------------------------------------------------------------------


def test_dockerfile_has_sandbox_and_proxy_targets() -> None:
    stages = dockerfile_stages()
    assert {"sandbox", "proxy", "orchestrator"} <= set(stages)


def test_every_copy_source_exists_and_is_not_ignored() -> None:
    ignored = {
        line.strip()
        for line in (REPO / ".dockerignore").read_text().split("\n")
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv"} <= ignored
    for lines in dockerfile_stages().values():
        for line in lines:
            if not line.startswith("COPY") or "--from=" in line:
                continue
            sources = [w for w in line.split()[1:-1] if not w.startswith("--")]
            for src in sources:
                assert (REPO / src).exists(), src
                assert src.rstrip("/").split("/")[0] not in ignored, src


def _final_user(lines: list[str]) -> str | None:
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    return users[-1] if users else None


def test_proxy_image_runs_as_non_root_with_a_state_volume() -> None:
    proxy = dockerfile_stages()["proxy"]
    assert _final_user(proxy) == "airlock-proxy"
    assert any(line.startswith("VOLUME") and "/var/lib/airlock-proxy" in line for line in proxy)
    entry = next(line for line in proxy if line.startswith("ENTRYPOINT"))
    assert "airlock-proxy" in entry
    assert any(line.startswith("HEALTHCHECK") and "/v1/health" in line for line in proxy)


def test_sandbox_image_has_the_tools_the_ca_variables_and_drops_privileges() -> None:
    sandbox = " ".join(dockerfile_stages()["sandbox"])
    for package in ("git", "gh", "ripgrep", "ca-certificates", "tini"):
        assert re.search(rf"apt-get install [^&]*\b{package}\b", sandbox), package
    assert "/opt/airlock/bin/airlock-signed-commit /usr/local/bin/gh-signed-commit" in sandbox
    assert (
        "deploy/docker/sandbox-entrypoint.sh /usr/local/bin/airlock-sandbox-entrypoint" in sandbox
    )
    assert '"airlock-sandbox-entrypoint"' in sandbox
    assert "ARG AIRLOCK_SANDBOX_LOCK=sandbox" in dockerfile_stages()["venv-sandbox"]
    # Two users: the agent's commands never run as the daemon's user.
    assert "useradd" in sandbox and "agent" in sandbox and "AIRLOCK_EXEC_USER=agent" in sandbox
    # The image itself starts as root only so that the entrypoint can install the CA;
    # test_sandbox_entrypoint.py checks that it then drops to the airlock user.
    assert _final_user(dockerfile_stages()["sandbox"]) is None
    entry_script = (REPO / "deploy" / "docker" / "sandbox-entrypoint.sh").read_text()
    for var in ("SSL_CERT_FILE", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE"):
        assert f"export {var}=" in entry_script


def test_images_install_the_wheel_by_file_never_by_name() -> None:
    for stage in ("venv-sandbox", "venv-proxy", "venv-client"):
        text = " ".join(dockerfile_stages()[stage])
        assert re.search(r'pip install --no-deps "\$\{w\}"', text), stage
        assert "pip install airlock" not in text


def test_images_install_dependencies_only_from_hashed_locks() -> None:
    """Every pip install of a dependency names a lock file with --require-hashes."""
    for stage, lock in (
        ("wheel", "build.lock"),
        ("venv-sandbox", "${AIRLOCK_SANDBOX_LOCK}.lock"),
        ("venv-proxy", "proxy.lock"),
        ("venv-client", "client.lock"),
    ):
        text = " ".join(dockerfile_stages()[stage])
        assert "--require-hashes --no-deps -r" in text and lock in text, stage
    for lock in ("build", "sandbox", "sandbox-types", "proxy", "client", "dev"):
        body = (REPO / "requirements" / f"{lock}.lock").read_text()
        pins = [ln for ln in body.splitlines() if re.match(r"^[A-Za-z0-9_.\-\[\]]+==", ln)]
        assert pins, lock
        assert body.count("--hash=sha256:") >= len(pins), lock


def test_dockerfile_builds_offline_with_debians_docker() -> None:
    """No remote frontend, no BuildKit-only COPY flags, a base that may be local."""
    text = DOCKERFILE.read_text()
    assert not re.search(r"^#\s*syntax\s*=", text, re.MULTILINE | re.IGNORECASE)
    assert "--chmod" not in text and "--chown" not in text and "RUN --mount" not in text
    assert re.search(r"^ARG PYTHON_IMAGE=", text, re.MULTILINE)
    assert "FROM ${PYTHON_IMAGE} AS base" in text
    compose_text = COMPOSE.read_text()
    assert not re.search(r"^name:", compose_text, re.MULTILINE), "docker-compose 1.29 rejects name:"


def test_every_shell_snippet_parses() -> None:
    """`sh -n` on each RUN of the Dockerfile, the entrypoint and the compose one-shot."""
    snippets: list[str] = []
    for lines in dockerfile_stages().values():
        snippets += [line[len("RUN ") :] for line in lines if line.startswith("RUN ")]
    assert len(snippets) >= 6
    snippets.append((REPO / "deploy" / "docker" / "sandbox-entrypoint.sh").read_text())
    snippets.append(service("prepare")["command"][0])
    for snippet in snippets:
        proc = subprocess.run(
            ["sh", "-n", "-c", snippet], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, f"{snippet[:80]}...: {proc.stderr}"
    broken = subprocess.run(["sh", "-n", "-c", "for x in; do"], capture_output=True, check=False)
    assert broken.returncode != 0, "sh -n must reject a broken snippet"


def test_locally_built_images_are_never_pulled() -> None:
    """A service using a `:local` tag must build it; compose would otherwise pull it."""
    for name, svc in compose()["services"].items():
        if str(svc.get("image", "")).endswith(":local"):
            assert svc.get("build"), f"{name} uses a local image without build:"


# A strict, offline subset of the Compose Specification: every key this file may
# use. A typo (`healtcheck:`) would otherwise be ignored by a YAML parse and only
# surface at `docker compose up` on a machine with an engine.
TOP_LEVEL = {"name", "services", "networks", "volumes", "secrets", "configs"}
SERVICE_KEYS = {
    "build", "image", "command", "entrypoint", "environment", "env_file", "volumes",
    "networks", "network_mode", "depends_on", "healthcheck", "restart", "read_only",
    "cap_add", "cap_drop", "security_opt", "tmpfs", "user", "group_add", "profiles",
    "ports", "expose", "labels", "init", "working_dir", "stop_grace_period", "ulimits",
    "pull_policy", "secrets", "extra_hosts", "dns", "hostname", "mem_limit", "cpus",
}  # fmt: skip
BUILD_KEYS = {"context", "target", "dockerfile", "args", "cache_from", "labels"}
HEALTHCHECK_KEYS = {
    "test",
    "interval",
    "timeout",
    "retries",
    "start_period",
    "start_interval",
    "disable",
}
SERVICE_NETWORK_KEYS = {"aliases", "ipv4_address", "ipv6_address", "priority"}
NETWORK_KEYS = {
    "internal",
    "driver",
    "driver_opts",
    "ipam",
    "name",
    "external",
    "labels",
    "attachable",
}
DEPENDS_CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
RESTART = {"no", "always", "on-failure", "unless-stopped"}


def compose_errors(doc: dict[str, Any]) -> list[str]:
    errors: list[str] = []

    def unknown(where: str, data: dict[str, Any], allowed: set[str]) -> None:
        for key in data:
            if key not in allowed and not str(key).startswith("x-"):
                errors.append(f"{where}: unknown key {key!r}")

    unknown("top level", doc, TOP_LEVEL)
    services: dict[str, Any] = doc.get("services", {})
    networks: dict[str, Any] = doc.get("networks") or {}
    volumes: dict[str, Any] = doc.get("volumes") or {}
    for name, net in networks.items():
        unknown(f"networks.{name}", net or {}, NETWORK_KEYS)
    for name, svc in services.items():
        where = f"services.{name}"
        unknown(where, svc, SERVICE_KEYS)
        if "build" in svc:
            unknown(f"{where}.build", svc["build"], BUILD_KEYS)
        if "healthcheck" in svc:
            unknown(f"{where}.healthcheck", svc["healthcheck"], HEALTHCHECK_KEYS)
        if svc.get("restart", "no") not in RESTART:
            errors.append(f"{where}.restart: {svc['restart']!r}")
        if "network_mode" in svc and "networks" in svc:
            errors.append(f"{where}: network_mode and networks are exclusive")
        nets = svc.get("networks", [])
        for net in nets:
            if net not in networks:
                errors.append(f"{where}.networks: undefined network {net!r}")
            if isinstance(nets, dict):
                unknown(f"{where}.networks.{net}", nets[net] or {}, SERVICE_NETWORK_KEYS)
        for dep, cond in (svc.get("depends_on") or {}).items():
            if dep not in services:
                errors.append(f"{where}.depends_on: undefined service {dep!r}")
            if cond.get("condition") not in DEPENDS_CONDITIONS:
                errors.append(f"{where}.depends_on.{dep}: condition {cond.get('condition')!r}")
        for entry in svc.get("volumes", []):
            source = entry.split(":")[0]
            if not source.startswith((".", "/")) and source not in volumes:
                errors.append(f"{where}.volumes: undefined volume {source!r}")
            if entry.count(":") == 2 and entry.rsplit(":", 1)[1] not in {"ro", "rw", "z", "Z"}:
                errors.append(f"{where}.volumes: bad mode in {entry!r}")
    return errors


def test_compose_uses_only_known_keys_and_defined_references() -> None:
    assert compose_errors(compose()) == []


def test_the_compose_checker_catches_typos_and_dangling_references() -> None:
    broken = compose()
    broken["services"]["redis"]["healtcheck"] = broken["services"]["redis"].pop("healthcheck")
    broken["services"]["sandbox"]["depends_on"]["ca-exprt"] = {"condition": "service_healthy"}
    broken["services"]["sandbox"]["volumes"].append("workspce:/x")
    broken["services"]["proxy-a"]["networks"]["sandbx"] = {}
    broken["services"]["proxy-b"]["depends_on"]["proxy-a"]["condition"] = "healthy"
    errors = compose_errors(broken)
    for needle in ("'healtcheck'", "'ca-exprt'", "'workspce'", "'sandbx'", "'healthy'"):
        assert any(needle in e for e in errors), needle
