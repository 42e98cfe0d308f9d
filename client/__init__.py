"""airlock.client: what orchestrators import.

The names below are loaded on first use, so ``import airlock.client`` stays
cheap and a missing optional dependency (the Docker SDK) only matters to the
code that needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "DaemonClient": "airlock.client.daemon",
    "AirlockError": "airlock.client.daemon",
    "ClientError": "airlock.client.errors",
    "ToolError": "airlock.client.errors",
    "DaemonUnavailable": "airlock.client.errors",
    "CallTimeout": "airlock.client.errors",
    "ProxyUnavailable": "airlock.client.proxy",
    "CredentialError": "airlock.client.providers",
    "git_basic_rule": "airlock.client.leases",
    "github_api_rule": "airlock.client.leases",
    "github_rules": "airlock.client.leases",
    "vercel_rules": "airlock.client.leases",
    "github_placeholder": "airlock.client.leases",
    "vercel_placeholder": "airlock.client.leases",
    "github_app_replacement": "airlock.client.leases",
    "ProxyClient": "airlock.client.proxy",
    "ProxyError": "airlock.client.proxy",
    "GitHubAppProvider": "airlock.client.providers",
    "StaticTokenProvider": "airlock.client.providers",
    "CommandTokenProvider": "airlock.client.providers",
    "InstallationRequiredError": "airlock.client.providers",
    "TokenRequestRejectedError": "airlock.client.providers",
    "TokenRequestFailedError": "airlock.client.providers",
    "Sandbox": "airlock.client.sandboxes",
    "LocalSandbox": "airlock.client.sandboxes",
    "DaemonSandbox": "airlock.client.sandboxes",
    "DockerSandbox": "airlock.client.sandboxes",
    "GitHubShell": "airlock.client.github",
    "authenticate_github": "airlock.client.delivery",
    "authenticate_vercel": "airlock.client.delivery",
}

# Three views of one list, for three readers: the lazy loader (the table above),
# `import *` and linters (__all__, literal so static tools can read it) and type
# checkers (the imports below). tests/client/test_public_api.py pins the list and
# checks the three agree.
__all__ = [
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

if TYPE_CHECKING:
    from .daemon import AirlockError, DaemonClient
    from .delivery import authenticate_github, authenticate_vercel
    from .errors import CallTimeout, ClientError, DaemonUnavailable, ToolError
    from .github import GitHubShell
    from .leases import (
        git_basic_rule,
        github_api_rule,
        github_app_replacement,
        github_placeholder,
        github_rules,
        vercel_placeholder,
        vercel_rules,
    )
    from .providers import (
        CommandTokenProvider,
        CredentialError,
        GitHubAppProvider,
        InstallationRequiredError,
        StaticTokenProvider,
        TokenRequestFailedError,
        TokenRequestRejectedError,
    )
    from .proxy import ProxyClient, ProxyError, ProxyUnavailable
    from .sandboxes import DaemonSandbox, DockerSandbox, LocalSandbox, Sandbox


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'airlock.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
