"""The repository stands alone and sets itself up.

- Nothing refers to files outside it (the contract's old home next door).
- docs/reference.md is what `make docs` generates from the code right now.
- A clean copy's `make -n test` installs the system tools, builds the venv from
  the hash-pinned lock and runs the suite; the installer's dry run names the
  one apt command, and without root it prints the command instead of failing
  obscurely. Chroot-free: the installer sees a PATH of stand-ins.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.trees import copy_files

REPO = Path(__file__).resolve().parents[1]
# Spelled in pieces so this file does not match itself.
FORBIDDEN = ("../" + "shared", "/work/" + "shared", "DESIGN" + ".md")


def tracked_files() -> list[Path]:
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout
    return [REPO / name for name in out.decode().split("\0") if name]


def test_nothing_refers_outside_the_repository() -> None:
    files = tracked_files()
    assert len(files) > 100, "git ls-files found too little: is this a checkout?"
    offenders = []
    for path in files:
        if not path.is_file() or path.is_symlink():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for needle in FORBIDDEN:
            if needle in text:
                offenders.append(f"{path.relative_to(REPO)}: {needle}")
    assert offenders == [], "the repository must stand alone; cite docs/reference.md instead"


def test_the_conformance_data_is_vendored_with_its_licence_notes() -> None:
    data = REPO / "tests" / "daemon" / "apply_patch" / "conformance"
    assert len([p for p in data.iterdir() if p.is_dir()]) == 23
    source = (data / "SOURCE.md").read_text(encoding="utf-8")
    assert "Apache License, Version 2.0" in source and "openai/codex" in source


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}


def test_reference_doc_is_fresh() -> None:
    proc = subprocess.run(
        [sys.executable, "scripts/gen_reference.py", "--check"],
        cwd=REPO,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"{proc.stderr.strip()} (run `make docs` and commit)"


def test_reference_doc_covers_what_the_code_serves(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import gen_reference
    finally:
        sys.path.remove(str(REPO / "scripts"))
    from airlock.daemon.errors import ErrorCode
    from airlock.daemon.protocol import TOOL_SPECS

    text = gen_reference.render()
    for spec in TOOL_SPECS:
        assert f"### `{spec.name}`" in text
        for field in spec.input_model.model_fields:
            assert f"| `{field}` |" in text, (spec.name, field)
    for code in ErrorCode:
        assert f"| `{code.value}` |" in text
    for route in ("`/v1/tools/{name}`", "`/v1/sessions/{sid}/leases/{lid}`"):
        assert route in text
    for binary in ("airlockd", "airlock-proxy", "airlock", "airlock-signed-commit"):
        assert f"### `{binary}`" in text
    assert "`--log-format`" in text and "`--version`" in text
    # --check notices a stale copy.
    stale = tmp_path / "reference.md"
    stale.write_text(text.replace("file_read", "file_reed"), encoding="utf-8")
    assert gen_reference.main(["--check", "--output", str(stale)]) == 1
    stale.write_text(text, encoding="utf-8")
    assert gen_reference.main(["--check", "--output", str(stale)]) == 0


@pytest.fixture
def clean_copy(tmp_path: Path) -> Path:
    """The tracked files only, as a fresh clone has them (no .venv, no caches)."""
    files = [p for p in tracked_files() if p.relative_to(REPO).parts[0] not in (".venv", ".git")]
    return copy_files(files, REPO, tmp_path / "clone")


def test_make_n_test_in_a_clean_copy_installs_then_tests(clean_copy: Path) -> None:
    proc = subprocess.run(
        ["make", "-n", "test"],
        cwd=clean_copy,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()

    def first(needle: str) -> int:
        for i, line in enumerate(lines):
            if needle in line:
                return i
        raise AssertionError(f"`make -n test` never runs {needle!r}:\n{proc.stdout}")

    order = [
        first("scripts/install-system-deps.sh"),
        first("-m venv .venv"),
        first("--require-hashes --no-deps -r requirements/dev.lock"),
        first("ruff check"),
        first("mypy"),
        first("pytest -q"),
    ]
    assert order == sorted(order), proc.stdout
    assert (clean_copy / "requirements" / "dev.lock").is_file()


def _stub_path(tmp_path: Path, uid: int, installed: bool) -> str:
    """A PATH with only what the installer needs: real shell tools, fake dpkg/id."""
    stubs = tmp_path / f"bin-{uid}-{installed}"
    stubs.mkdir()
    for tool in ("bash", "sh", "grep", "sed", "cat", "env"):
        real = shutil.which(tool)
        assert real, tool
        (stubs / tool).symlink_to(real)
    (stubs / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (stubs / "dpkg-query").write_text(
        "#!/bin/sh\necho 'install ok installed'\n" if installed else "#!/bin/sh\nexit 1\n"
    )
    # apt-get must never run in these tests: a stand-in that fails loudly.
    (stubs / "apt-get").write_text("#!/bin/sh\necho 'apt-get ran' >&2\nexit 99\n")
    for stub in ("id", "dpkg-query", "apt-get"):
        (stubs / stub).chmod(0o755)
    return str(stubs)


def _installer(path: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "install-system-deps.sh"), *args],
        env={"PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_installer_dry_run_names_every_missing_package(tmp_path: Path) -> None:
    done = _installer(_stub_path(tmp_path, 0, installed=False), "--dry-run")
    assert done.returncode == 0, done.stderr
    wanted = _installer(_stub_path(tmp_path, 1, installed=True), "--list").stdout.split()
    for pkg in ("git", "gh", "redis-server", "ripgrep", "nodejs", "npm", "util-linux"):
        assert pkg in wanted
    would = [line for line in done.stdout.splitlines() if "would run:" in line]
    assert len(would) == 1
    assert would[0].split("would run: ", 1)[1] == (
        "apt-get update && apt-get install -y --no-install-recommends " + " ".join(wanted)
    )
    assert "apt-get ran" not in done.stderr


def test_installer_without_root_prints_the_one_command_and_fails(tmp_path: Path) -> None:
    done = _installer(_stub_path(tmp_path, 1000, installed=False))
    assert done.returncode == 1
    assert "apt-get ran" not in done.stderr
    commands = [
        line.strip() for line in done.stderr.splitlines() if line.strip().startswith("sudo ")
    ]
    assert len(commands) == 1 and "apt-get install -y" in commands[0] and "gh" in commands[0]


def test_installer_is_a_no_op_when_everything_is_there() -> None:
    # This machine ran `make test`, so the real tools are present: nothing to do.
    done = _installer(os.environ["PATH"])
    assert done.returncode == 0, done.stderr
    assert "every system tool the tests need is installed" in done.stdout
