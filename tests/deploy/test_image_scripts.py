"""The image tooling, checked without a container engine (CI also runs it for real:
`.ci/run` -> `make images-smoke`).

- `.ci/run` stays a thin wrapper: dockerd started and always stopped, the images
  built and smoke-tested, the suite run; no `apt-get` of its own.
- `scripts/base-image.sh` refuses bad CA files before doing anything.
- `scripts/images.sh smoke` tears down on every exit and checks the isolation.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.fakes.tls import TestCA

REPO = Path(__file__).resolve().parents[2]


def test_ci_is_a_thin_wrapper_that_runs_the_images_smoke() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    for step in (
        "scripts/install-system-deps.sh --with-images",
        "scripts/dockerd.sh start",
        "scripts/dockerd.sh stop",
        "make images-smoke",
        "make test",
    ):
        assert step in ci, step
    assert "trap" in ci and "apt-get" not in ci
    # The suite runs last, so its summary closes the log.
    assert ci.rstrip().splitlines()[-1].strip() == "make test"
    dry = subprocess.run(
        ["make", "-n", "images-smoke"], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert "scripts/images.sh smoke" in dry.stdout


def test_base_image_refuses_a_key_or_a_non_pem_extra_ca(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    (tmp_path / "ca").mkdir()
    ca = TestCA(tmp_path / "ca")
    key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    key_bundle = tmp_path / "with-key.pem"
    key_bundle.write_bytes(Path(ca.ca_path).read_bytes() + key)
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    for bad, why in ((key_bundle, "private key"), (junk, "no PEM"), (tmp_path / "no", "readable")):
        proc = subprocess.run(
            ["bash", str(REPO / "scripts" / "base-image.sh"), "--extra-ca", str(bad)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 2 and why in proc.stderr, (bad, proc.stderr)


def test_smoke_always_tears_down_and_checks_both_halves_of_isolation() -> None:
    text = (REPO / "scripts" / "images.sh").read_text()
    assert "trap teardown EXIT" in text
    assert "down -v --remove-orphans" in text and "sandbox-firewall.sh remove" in text
    # The negative check means something only next to a positive one.
    assert '"$probe" proxy 8080' in text and "blocked:*" in text
    firewall = (REPO / "scripts" / "sandbox-firewall.sh").read_text()
    assert "INPUT -i" in firewall and "-j DROP" in firewall


def test_every_script_parses() -> None:
    for script in [*sorted((REPO / "scripts").glob("*.sh")), REPO / ".ci" / "run"]:
        proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, (script.name, proc.stderr)
        assert script.stat().st_mode & 0o111, f"{script.name} is not executable"
