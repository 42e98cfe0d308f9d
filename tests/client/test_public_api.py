"""The public API of ``airlock.client``, pinned (as httpx pins its own).

A name added to or dropped from the package is a change to what orchestrators
import: this test makes it a deliberate one.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import airlock.client

PUBLIC_API = [
    "AirlockError",
    "CallTimeout",
    "ClientError",
    "CommandTokenProvider",
    "CredentialError",
    "DaemonClient",
    "DaemonSandbox",
    "DaemonUnavailable",
    "DockerSandbox",
    "GitHubAppProvider",
    "GitHubShell",
    "InstallationRequiredError",
    "LocalSandbox",
    "ProxyClient",
    "ProxyError",
    "ProxyUnavailable",
    "Sandbox",
    "StaticTokenProvider",
    "TokenRequestFailedError",
    "TokenRequestRejectedError",
    "ToolError",
    "authenticate_github",
    "authenticate_vercel",
    "git_basic_rule",
    "github_api_rule",
    "github_app_replacement",
    "github_placeholder",
    "github_rules",
    "vercel_placeholder",
    "vercel_rules",
]


def _type_checking_imports() -> dict[str, str]:
    """name -> module, from the ``if TYPE_CHECKING:`` block of the package's ``__init__``."""
    tree = ast.parse(Path(airlock.client.__file__).read_text())
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module is not None
                # Relative within the package (``from .daemon import X``): name it in full.
                module = f"airlock.client.{imp.module}" if imp.level == 1 else imp.module
                names.update({alias.name: module for alias in imp.names})
    return names


def test_the_public_api_is_pinned() -> None:
    assert airlock.client.__all__ == PUBLIC_API
    assert sorted(airlock.client._EXPORTS) == PUBLIC_API


def test_every_public_name_loads_from_the_module_the_table_names() -> None:
    table = airlock.client._EXPORTS
    for name in PUBLIC_API:
        value = getattr(airlock.client, name)
        assert value is getattr(importlib.import_module(table[name]), name), name


def test_type_checkers_see_the_same_names_from_the_same_modules() -> None:
    assert _type_checking_imports() == airlock.client._EXPORTS


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    try:
        _ = airlock.client.NoSuchThing
    except AttributeError as err:
        assert "NoSuchThing" in str(err)
    else:
        raise AssertionError("airlock.client.NoSuchThing resolved")
