"""Only ``proxy/mitm/`` patches mitmproxy (DESIGN, "One place for each concern").

A patch is an assignment to an attribute reached from a name a module bound by
importing mitmproxy (``_http1.make_body_reader = ...``,
``HttpStream.start_request_stream = ...``), a ``setattr`` on one, or a
``del`` of one. Setting fields of the flows and connections mitmproxy hands to
hooks (``flow.response = ...``) is its addon API, not a patch, and is not
counted: those names come from parameters, never from an import.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_packaging import REPO, parse_fresh

MITM_PACKAGE = REPO / "proxy" / "mitm"


def _mitmproxy_names(tree: ast.Module) -> set[str]:
    """Names the module binds to mitmproxy modules, classes or functions."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "mitmproxy" or alias.name.startswith("mitmproxy."):
                    names.add(alias.asname or alias.name.split(".")[0])
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and (node.module == "mitmproxy" or node.module.startswith("mitmproxy."))
        ):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return [t for target in node.targets for t in _unpack(target)]
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    return []


def _unpack(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        return [t for elt in target.elts for t in _unpack(elt)]
    return [target]


def mitmproxy_patches(path: Path, tree: ast.Module) -> list[str]:
    """``file:line`` of every patch of mitmproxy in ``tree``."""
    imported = _mitmproxy_names(tree)
    found: list[str] = []
    where = path.relative_to(REPO)
    for node in ast.walk(tree):
        for target in _targets(node):
            if isinstance(target, ast.Attribute) and _root(target) in imported:
                found.append(f"{where}:{target.lineno}: {ast.unparse(target)}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
            and node.args
            and _root(node.args[0]) in imported
        ):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_nothing_outside_proxy_mitm_patches_mitmproxy() -> None:
    offenders = [
        hit
        for path in sorted((REPO / "proxy").rglob("*.py"))
        if MITM_PACKAGE not in path.parents
        for hit in mitmproxy_patches(path, parse_fresh(path))
    ]
    assert not offenders, "patch mitmproxy only in proxy/mitm/:\n" + "\n".join(offenders)


def test_nothing_outside_proxy_mitm_uses_its_patching_helper() -> None:
    """``mitm.patching.replace`` is how the package patches; nobody else may borrow it."""
    offenders = []
    for path in sorted((REPO / "proxy").rglob("*.py")):
        if MITM_PACKAGE in path.parents:
            continue
        for node in ast.walk(parse_fresh(path)):
            if isinstance(node, ast.ImportFrom) and (
                (node.module or "").endswith("patching")
                or any(alias.name == "patching" for alias in node.names)
            ):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not offenders, "only proxy/mitm/ patches mitmproxy:\n" + "\n".join(offenders)


_PATCHING = """
import mitmproxy.proxy.server
from mitmproxy.proxy.layers.http import _http1 as h1, HttpStream
h1.make_body_reader = reader
HttpStream.start_request_stream, other = start, 1
mitmproxy.proxy.server.TCP_TIMEOUT += 1
setattr(h1.Http1Server, "_handle_event", handle)
flow.response = answer
"""


def test_the_check_finds_each_kind_of_patch_and_spares_the_addon_api() -> None:
    hits = mitmproxy_patches(REPO / "proxy" / "example.py", ast.parse(_PATCHING))
    assert sorted(hit.split(": ", 1)[0] for hit in hits) == [
        "proxy/example.py:4",
        "proxy/example.py:5",
        "proxy/example.py:6",
        "proxy/example.py:7",
    ], hits
