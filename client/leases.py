"""Lease-rule builders: the rules airlock-proxy's control API accepts, for the usual services.

A lease tells the proxy to swap a placeholder for a real token on one host. These
build the :class:`~airlock.proxy.protocol.LeaseRule` shapes the proxy expects,
so an orchestrator need not guess them::

    rules = [*github_rules(real, placeholder), *vercel_rules(vercel_token, other)]
    async with proxy.lease(session_id, rules, ttl_s=600):
        ...

- :func:`github_api_rule`: ``Authorization: token|Bearer PLACEHOLDER`` on the
  GitHub API becomes ``Bearer REAL`` (what ``gh`` and REST clients send);
- :func:`git_basic_rule`: HTTP Basic with the placeholder as password on the git
  host becomes ``x-access-token:REAL`` (what git sends over HTTPS);
- :func:`vercel_rules`: ``Bearer PLACEHOLDER`` on Vercel's API hosts;
- :func:`github_app_replacement`: instead of a token, let the proxy mint a
  GitHub App installation token for exactly these repositories and
  permissions (the orchestrator never holds it).

Placeholders look like the credential they stand for, so clients that check a
token's shape accept them: :func:`github_placeholder` (``ghs_`` and 36 of
``[A-Za-z0-9]``, an installation token's shape) and :func:`vercel_placeholder`
(24 of ``[A-Za-z0-9]``). Every builder draws one when none is given.

Each rule may carry an ``allow`` (:class:`~airlock.proxy.protocol.Allow`):
methods, paths, GraphQL operations, git repositories and push refs; the
proxy refuses anything outside it with 403 ``lease_scope``.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Iterable, Mapping, Sequence

from airlock.proxy.protocol import Allow, LeaseRule, Replacement

__all__ = [
    "git_basic_rule",
    "github_api_rule",
    "github_app_replacement",
    "github_placeholder",
    "github_rules",
    "vercel_placeholder",
    "vercel_rules",
]

_ALNUM = string.ascii_letters + string.digits
Credential = str | Replacement


def _random(n: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(n))


def github_placeholder() -> str:
    """A fresh placeholder shaped like a GitHub installation token: ``ghs_`` + 36 alphanumerics."""
    return "ghs_" + _random(36)


def vercel_placeholder() -> str:
    """A fresh placeholder shaped like a Vercel token: 24 alphanumerics."""
    return _random(24)


def github_app_replacement(
    repositories: Sequence[str],
    permissions: Mapping[str, str] | None = None,
    *,
    scheme: str = "bearer",
) -> Replacement:
    """Let the proxy mint a GitHub App installation token for ``repositories`` ("owner/name")."""
    return Replacement.model_validate(
        {
            "scheme": scheme,
            "provider": "github_app",
            "repositories": list(repositories),
            "permissions": dict(permissions) if permissions is not None else None,
        }
    )


def _replacement(credential: Credential, scheme: str, username: str) -> Replacement:
    if isinstance(credential, Replacement):
        data = credential.model_dump(exclude_none=True)
        data.update(scheme=scheme, username=username)
        return Replacement.model_validate(data)
    return Replacement.model_validate({"scheme": scheme, "token": credential, "username": username})


def github_api_rule(
    token: Credential,
    placeholder: str | None = None,
    *,
    host: str = "api.github.com",
    allow: Allow | None = None,
) -> LeaseRule:
    """GitHub's REST/GraphQL API (``gh``, octokit): token or Bearer placeholder → Bearer token."""
    return LeaseRule(
        host=host,
        placeholder=placeholder or github_placeholder(),
        schemes=["token", "bearer"],
        replace=_replacement(token, "bearer", "x-access-token"),
        allow=allow,
    )


def git_basic_rule(
    token: Credential,
    placeholder: str | None = None,
    *,
    host: str = "github.com",
    username: str = "x-access-token",
    allow: Allow | None = None,
) -> LeaseRule:
    """git over HTTPS: Basic auth whose password is the placeholder → ``username:token``."""
    return LeaseRule(
        host=host,
        placeholder=placeholder or github_placeholder(),
        schemes=["basic"],
        replace=_replacement(token, "basic", username),
        allow=allow,
    )


def github_rules(
    token: Credential,
    placeholder: str | None = None,
    *,
    api_host: str = "api.github.com",
    git_host: str = "github.com",
    api_allow: Allow | None = None,
    git_allow: Allow | None = None,
) -> list[LeaseRule]:
    """Both GitHub rules (API and git) for one token (or provider) and placeholder."""
    placeholder = placeholder or github_placeholder()
    return [
        github_api_rule(token, placeholder, host=api_host, allow=api_allow),
        git_basic_rule(token, placeholder, host=git_host, allow=git_allow),
    ]


def vercel_rules(
    token: str,
    placeholder: str | None = None,
    *,
    hosts: Iterable[str] = ("api.vercel.com", "vercel.com"),
    allow: Allow | None = None,
) -> list[LeaseRule]:
    """Vercel's CLI and API: ``Bearer PLACEHOLDER`` → ``Bearer token`` on each host."""
    placeholder = placeholder or vercel_placeholder()
    return [
        LeaseRule(
            host=host,
            placeholder=placeholder,
            schemes=["bearer"],
            replace=Replacement(scheme="bearer", token=token),
            allow=allow,
        )
        for host in hosts
    ]
