"""Credential providers: where real tokens come from.

Only the orchestrator side (outside the sandbox) ever holds what these return;
the sandbox sees placeholders, swapped by the proxy under a lease.
"""

from .base import IssuedToken, TokenProvider
from .command import CommandTokenProvider
from .errors import (
    CredentialError,
    InstallationRequiredError,
    TokenRequestFailedError,
    TokenRequestRejectedError,
)
from .github_app import GitHubAppProvider
from .static import StaticTokenProvider

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
