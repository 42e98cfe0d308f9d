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
- :func:`vercel_rules`: ``Bearer PLACEHOLDER`` on Vercel's API hosts.
"""

from __future__ import annotations

from collections.abc import Iterable

from airlock.proxy.protocol import LeaseRule, Replacement

__all__ = ["git_basic_rule", "github_api_rule", "github_rules", "vercel_rules"]


def github_api_rule(token: str, placeholder: str, *, host: str = "api.github.com") -> LeaseRule:
    """GitHub's REST/GraphQL API (``gh``, octokit): token or Bearer placeholder → Bearer token."""
    return LeaseRule(
        host=host,
        placeholder=placeholder,
        schemes=["token", "bearer"],
        replace=Replacement(scheme="bearer", token=token),
    )


def git_basic_rule(
    token: str,
    placeholder: str,
    *,
    host: str = "github.com",
    username: str = "x-access-token",
) -> LeaseRule:
    """git over HTTPS: Basic auth whose password is the placeholder → ``username:token``."""
    return LeaseRule(
        host=host,
        placeholder=placeholder,
        schemes=["basic"],
        replace=Replacement(scheme="basic", token=token, username=username),
    )


def github_rules(
    token: str,
    placeholder: str,
    *,
    api_host: str = "api.github.com",
    git_host: str = "github.com",
) -> list[LeaseRule]:
    """Both GitHub rules (API and git) for one token and placeholder."""
    return [
        github_api_rule(token, placeholder, host=api_host),
        git_basic_rule(token, placeholder, host=git_host),
    ]


def vercel_rules(
    token: str,
    placeholder: str,
    *,
    hosts: Iterable[str] = ("api.vercel.com", "vercel.com"),
) -> list[LeaseRule]:
    """Vercel's CLI and API: ``Bearer PLACEHOLDER`` → ``Bearer token`` on each host."""
    return [
        LeaseRule(
            host=host,
            placeholder=placeholder,
            schemes=["bearer"],
            replace=Replacement(scheme="bearer", token=token),
        )
        for host in hosts
    ]
