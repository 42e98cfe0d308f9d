"""The provider interface shared by every credential source.

A provider answers one question: "a token for these repositories with these
permissions". Static and command providers ignore the scope (they have one
token); the GitHub App provider mints a token scoped to exactly that.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class IssuedToken:
    """A credential and when it stops working (None: unknown / never).

    ``repr`` never shows the token, so logging the object is safe.
    """

    token: str = field(repr=False)
    expires_at: dt.datetime | None = None
    repositories: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"IssuedToken(expires_at={self.expires_at}, repositories={self.repositories})"


@runtime_checkable
class TokenProvider(Protocol):
    """Anything that can hand out a GitHub (or Vercel) token."""

    async def get_token(
        self,
        repositories: Sequence[str] = (),
        permissions: Mapping[str, str] | None = None,
    ) -> IssuedToken:
        """Return a token valid for ``repositories`` ("owner/repo") and ``permissions``."""
        ...
