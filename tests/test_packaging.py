"""The distribution's shape: what the wheel and the sdist carry, and how airlock is imported."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("module", ["airlock.daemon.protocol", "airlock.proxy.protocol"])
def test_protocol_modules_are_import_light(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "heavy = sorted(m for m in sys.modules if m == 'mitmproxy' or m.startswith('mitmproxy.')"
        " or m == 'aiohttp.web' or m.startswith('aiohttp.web_'))\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} pulls in {out.stdout.strip()}"


def test_wheel_holds_only_airlock_packages(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(REPO)],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("airlock-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        scripts = archive.read(entry_points).decode()
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"airlock"}
    for package in ("daemon", "proxy", "client"):
        assert f"airlock/{package}/__init__.py" in names
    assert "airlock/daemon/protocol.py" in names and "airlock/proxy/protocol.py" in names
    for script in ("airlockd", "airlock-proxy", "airlock", "airlock-signed-commit"):
        assert f"{script} = " in scripts
