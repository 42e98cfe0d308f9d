"""The distribution's shape: what the wheel and the sdist carry, and how airlock is imported."""

from __future__ import annotations

import ast
import functools
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.fakes.trees import copy_files

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


def _tracked_copy(dest: Path) -> Path:
    """The tracked tree (as a clone has it) so builds never write into the checkout."""
    names = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.decode()
    return copy_files((REPO / name for name in filter(None, names.split("\0"))), REPO, dest)


def test_sdist_builds_and_a_wheel_builds_from_it(tmp_path: Path) -> None:
    import tarfile

    tree = _tracked_copy(tmp_path / "tree")
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-c",
         "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))",
         str(out)],
        cwd=tree, check=True, capture_output=True, text=True,
    )  # fmt: skip
    (sdist,) = out.glob("airlock-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
        archive.extractall(tmp_path / "unpacked", filter="data")
    root = names[0].split("/", 1)[0]
    for needed in ("pyproject.toml", "README.md", "airlock/daemon/cli.py", "airlock/proxy/cli.py",
                   "airlock/client/cli_common.py", "airlock/py.typed"):  # fmt: skip
        assert f"{root}/{needed}" in names, needed
    # The sdist alone is enough to build the wheel users install.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "wheels"), str(tmp_path / "unpacked" / root)],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = (tmp_path / "wheels").glob("airlock-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert "airlock/daemon/protocol.py" in archive.namelist()


def test_version_comes_from_the_distribution_metadata() -> None:
    import re
    from importlib import metadata

    import airlock
    from airlock.client.cli_common import version

    assert airlock.__version__ == metadata.version("airlock") == version()
    # No second copy of the number anywhere in the packages.
    pinned = re.compile(r"""(VERSION|__version__)\s*=\s*["'][0-9]+\.[0-9]""")
    for top in ("daemon", "proxy", "client", "airlock"):
        for path in (REPO / top).rglob("*.py"):
            assert not pinned.search(path.read_text(encoding="utf-8")), path


TOP_LEVEL = ("daemon", "proxy", "client")


_PARSE_ALL = """
import ast, pickle, sys
trees = [ast.parse(open(p, encoding="utf-8").read(), p) for p in sys.argv[1:]]
sys.stdout.buffer.write(pickle.dumps(trees))
"""


@functools.lru_cache(maxsize=1)
def _parsed_tree() -> dict[Path, ast.Module]:
    """Every Python file of the checkout, parsed once, in a fresh interpreter.

    CPython 3.11.7 can raise "AST constructor recursion depth mismatch" from
    ``ast.parse`` late in a long run (after the suite's deep-recursion tests);
    a new interpreter parses cleanly, and once for both checks below.
    """
    paths = [
        path
        for top in ("daemon", "proxy", "client", "tests", "bench", "scripts", "deploy")
        for path in sorted((REPO / top).rglob("*.py"))
        if "conformance" not in path.parts
    ]
    done = subprocess.run(
        [sys.executable, "-c", _PARSE_ALL, *map(str, paths)], capture_output=True, check=True
    )
    trees: list[ast.Module] = pickle.loads(done.stdout)
    return dict(zip(paths, trees, strict=True))


def parse_fresh(path: Path) -> ast.Module:
    return _parsed_tree()[path]


def test_nothing_imports_the_top_level_daemon_proxy_or_client() -> None:
    """`airlock/` links make `daemon.errors` importable beside `airlock.daemon.errors`:
    two module objects, two `AirlockError` classes, `except` clauses that miss."""
    import ast

    offenders = []
    for top in ("daemon", "proxy", "client", "tests", "bench", "scripts", "deploy"):
        for path in (REPO / top).rglob("*.py"):
            if "conformance" in path.parts:
                continue
            tree = parse_fresh(path)
            for node in ast.walk(tree):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                elif (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    names = [node.args[0].value]
                for name in names:
                    if name.split(".")[0] in TOP_LEVEL:
                        offenders.append(
                            f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}: {name}"
                        )
    assert offenders == [], "import airlock.X, never X"


def test_imports_within_a_package_are_relative() -> None:
    """Only imports across packages name ``airlock.X``: the structure reads from the files
    themselves (a reader, or a tool that follows files, sees every edge inside a package)."""
    import ast

    offenders = []
    for top in TOP_LEVEL:
        own = f"airlock.{top}"
        for path in (REPO / top).rglob("*.py"):
            tree = parse_fresh(path)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    if node.module == own or node.module.startswith(own + "."):
                        offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.module}")
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name == own or alias.name.startswith(own + "."):
                            offenders.append(
                                f"{path.relative_to(REPO)}:{node.lineno}: {alias.name}"
                            )
    assert offenders == [], "import within the package relatively (from ..paths import Roots)"


def test_the_suite_refuses_a_top_level_import_at_run_time() -> None:
    """tests/conftest.py installs a guard: the mistake fails loudly, not subtly."""
    with pytest.raises(ImportError, match=r"airlock\.daemon"):
        __import__("daemon.errors")
    import airlock.daemon.errors as real

    assert "daemon.errors" not in sys.modules and real.__name__ == "airlock.daemon.errors"


def test_locks_are_made_from_the_current_pyproject() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from lock_stamp import deps_digest
    finally:
        sys.path.remove(str(REPO / "scripts"))
    recorded = (REPO / "requirements" / "pyproject-deps.sha256").read_text().strip()
    assert recorded == deps_digest(), (
        "requirements/*.lock are older than pyproject.toml's dependencies: run `make lock`"
    )
    assert len(list((REPO / "requirements").glob("*.lock"))) == 6
