"""Credential providers: where real tokens come from.

Only the orchestrator side (outside the sandbox) ever holds what these return;
the sandbox sees placeholders, swapped by the proxy under a lease.
"""

from airlock.client.providers.base import IssuedToken, TokenProvider
from airlock.client.providers.command import CommandTokenProvider
from airlock.client.providers.errors import (
    CredentialError,
    InstallationRequiredError,
    TokenRequestFailedError,
    TokenRequestRejectedError,
)
from airlock.client.providers.github_app import GitHubAppProvider
from airlock.client.providers.static import StaticTokenProvider

__all__ = [
    "CommandTokenProvider",
    "CredentialError",
    "GitHubAppProvider",
    "InstallationRequiredError",
    "IssuedToken",
    "StaticTokenProvider",
    "TokenProvider",
    "TokenRequestFailedError",
    "TokenRequestRejectedError",
]
