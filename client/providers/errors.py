"""Classified credential-provider failures.

Callers (the GitHub shell tool, an orchestrator's retry logic, a human reading a
log) need to know *why* a token could not be had, without ever seeing the token:

- :class:`InstallationRequiredError`: the GitHub App is not installed where it
  is needed; a human has to install it, retrying will not help.
- :class:`TokenRequestRejectedError`: the provider answered and said no (bad
  app key, repository outside the installation, permission the app lacks).
- :class:`TokenRequestFailedError`: anything else (network, 5xx, timeouts,
  unparseable answers); usually worth a retry.

Each keeps its cause as ``__cause__`` (``raise ... from exc``) and as ``.cause``.
Messages are built from status codes and GitHub's ``message`` field, never from
request or response bodies that could contain a credential.
"""

from __future__ import annotations

from ..errors import ClientError


class CredentialError(ClientError):
    """Base of every provider failure."""

    def __init__(
        self, message: str, *, status: int | None = None, cause: BaseException | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.cause = cause


class InstallationRequiredError(CredentialError):
    """The GitHub App has no installation for the org or repository."""

    def __init__(
        self,
        message: str = "app installation is required",
        *,
        status: int | None = None,
        cause: BaseException | None = None,
    ) -> None:
        if "app installation is required" not in message:
            message = f"app installation is required: {message}"
        super().__init__(message, status=status, cause=cause)


class TokenRequestRejectedError(CredentialError):
    """The provider refused to issue the token (4xx, non-zero exit)."""


class TokenRequestFailedError(CredentialError):
    """The token request did not complete (network, 5xx, timeout, garbage)."""
