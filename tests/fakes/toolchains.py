"""Tools that cannot sit in the dev lock, installed once per machine into a temp-dir cache.

``openai-agents`` and ``mcp`` 2.x need an h11 that mitmproxy 11.0's pin excludes,
and the MCP TypeScript SDK is an npm package: tests that drive them get a
separate venv (pip) or ``node_modules`` (npm) built on first use under
``$TMPDIR/airlock-test-toolchains/NAME``, then reused by later runs. The build
happens in a scratch directory renamed into place, under a file lock, so
concurrent test processes never see half an install. When the package
manager fails (no registry), the caller gets the reason to skip with.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

INSTALL_TIMEOUT_S = 600


def cache_root() -> Path:
    root = Path(tempfile.gettempdir()) / "airlock-test-toolchains"
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextlib.contextmanager
def _locked(name: str) -> Iterator[Path]:
    root = cache_root()
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield root / name


def _build(target: Path, steps: Sequence[Sequence[str]], *, cwd_is_target: bool) -> str | None:
    """Run ``steps`` in a scratch copy of ``target``; rename it into place. None, or why not."""
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    (scratch / "package.json").write_text('{"name": "airlock-test-toolchain", "private": true}\n')
    try:
        for step in steps:
            argv = [a.replace("{dir}", str(scratch)) for a in step]
            try:
                proc = subprocess.run(
                    argv,
                    cwd=scratch if cwd_is_target else None,
                    capture_output=True,
                    text=True,
                    timeout=INSTALL_TIMEOUT_S,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                return f"{' '.join(argv[:3])} failed: {exc}"
            if proc.returncode != 0:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
                return f"{' '.join(argv[:3])} exited {proc.returncode}: {' | '.join(tail)}"
        (scratch / ".complete").write_text("ok\n")
        scratch.rename(target)
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def python_venv(name: str, packages: Sequence[str]) -> tuple[Path | None, str]:
    """(the venv's python, "") or (None, why it could not be built)."""
    with _locked(name) as target:
        python = target / "bin" / "python"
        if not (target / ".complete").exists():
            shutil.rmtree(target, ignore_errors=True)
            # The venv's paths are baked in at creation: build in place, no rename.
            target.mkdir()
            steps = [
                [sys.executable, "-m", "venv", str(target)],
                [str(python), "-m", "pip", "install", "-q", *packages],
            ]
            for step in steps:
                try:
                    proc = subprocess.run(
                        step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
                    )
                except (OSError, subprocess.TimeoutExpired) as exc:
                    shutil.rmtree(target, ignore_errors=True)
                    return None, f"pip could not install {' '.join(packages)}: {exc}"
                if proc.returncode != 0:
                    shutil.rmtree(target, ignore_errors=True)
                    tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
                    return None, f"pip could not install {' '.join(packages)}: {tail}"
            (target / ".complete").write_text("ok\n")
        return python, ""


def npm_modules(name: str, packages: Sequence[str]) -> tuple[Path | None, str]:
    """(a directory whose node_modules holds ``packages``, "") or (None, why not)."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        return None, "node and npm are not installed (apt-get install nodejs npm)"
    with _locked(name) as target:
        if not (target / ".complete").exists():
            shutil.rmtree(target, ignore_errors=True)
            why = _build(
                target,
                [["npm", "install", "--no-audit", "--no-fund", *packages]],
                cwd_is_target=True,
            )
            if why is not None:
                return None, f"npm could not install {' '.join(packages)}: {why}"
        return target, ""


def env_without_venv() -> dict[str, str]:
    """This process's environment minus the dev venv's activation (for another interpreter)."""
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    return env
