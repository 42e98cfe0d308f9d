"""A provider that always returns one operator-supplied token.

For development and for credentials that are not GitHub App installations
(a fine-grained PAT, a Vercel token). The scope arguments are ignored: the
operator decided the scope when creating the token.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from .base import IssuedToken
from .errors import TokenRequestRejectedError


class StaticTokenProvider:
    """Hands out the same token every time."""

    def __init__(self, token: str, expires_at: dt.datetime | None = None) -> None:
        token = token.strip()
        if not token:
            raise TokenRequestRejectedError("static token is empty")
        self._token = token
        self._expires_at = expires_at

    def __repr__(self) -> str:
        return "StaticTokenProvider(token=<hidden>)"

    async def get_token(
        self,
        repositories: Sequence[str] = (),
        permissions: Mapping[str, str] | None = None,
    ) -> IssuedToken:
        return IssuedToken(self._token, self._expires_at, tuple(repositories))
