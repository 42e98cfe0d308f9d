"""The fake GitHub behind a real airlock-proxy: one fixture instead of one per module.

``FakeGitHub`` (tests/fakes/github.py) serves api.github.com and github.com on
loopback with its own CA; the proxy reaches it through ``--resolve`` and trusts
that CA through ``--upstream-ca``; a session allows both hosts, and ``env()``
is what a sandboxed program sees (proxy URL with the session's credentials,
the proxy CA trusted, a private HOME).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airlock.client.github.shell import GitHubShell
from airlock.client.providers import GitHubAppProvider
from airlock.client.proxy import ProxyClient
from airlock.client.sandboxes import LocalSandbox
from airlock.proxy.protocol import SessionInfo
from tests.fakes.github import FakeGitHub
from tests.fakes.proxy_harness import ProxyProcess, running_proxy

GITHUB_HOSTS = ("api.github.com", "github.com")
WIDGETS_WRITE = {"provider": "github", "repositories": ["acme/widgets"], "access": "write"}


def shell_call(command: str, description: str, /, **over: Any) -> dict[str, Any]:
    """A ``github_shell`` input asking for write access to acme/widgets; ``over`` replaces fields."""
    return {"command": command, "permissions": [WIDGETS_WRITE], "description": description, **over}


def proxy_for(
    gh: FakeGitHub,
    directory: Path,
    *,
    allow: Sequence[str] = GITHUB_HOSTS,
    intercept: Sequence[str] | None = None,
    store: str = "memory",
    extra_args: Sequence[str] = (),
) -> contextlib.AbstractAsyncContextManager[ProxyProcess]:
    """airlock-proxy in front of ``gh``: it resolves GitHub's hosts to the fake and trusts its CA."""
    return running_proxy(
        directory,
        intercept=intercept,
        allow=list(allow),
        resolve=gh.resolve,
        upstream_ca=gh.ca_path,
        store=store,
        extra_args=extra_args,
    )


def app_provider(gh: FakeGitHub, **options: Any) -> GitHubAppProvider:
    """The fake's GitHub App as a token provider for ``acme``, trusting the fake's CA.

    ``options`` override or add ``GitHubAppProvider`` keywords (``org``, ``api_url``, ``clock``).
    """
    kwargs: dict[str, Any] = {"org": "acme", "api_url": gh.api_url} | options
    return GitHubAppProvider(
        gh.app_id, gh.app_private_key_pem, ssl_context=gh.ca.client_context(), **kwargs
    )


def local_shell(
    provider: GitHubAppProvider,
    pc: ProxyClient,
    session: SessionInfo,
    sandbox_env: Mapping[str, str],
    *,
    workspace: Path,
    executables: Mapping[str, Sequence[str]],
    config_dir_base: Path,
) -> GitHubShell:
    """A :class:`GitHubShell` for ``acme`` running its commands on this machine
    (a ``LocalSandbox`` with ``sandbox_env``), 60 s per command."""
    return GitHubShell(
        org="acme",
        provider=provider,
        proxy=pc,
        session=session,
        sandbox=LocalSandbox(base_env=sandbox_env),
        workspace=str(workspace),
        executables=executables,
        config_dir_base=str(config_dir_base),
        timeout_s=60,
    )


@dataclass
class GitHubBehindProxy:
    gh: FakeGitHub
    proxy: ProxyProcess
    pc: ProxyClient
    session: SessionInfo
    home: Path

    def env(self, **extra: str) -> dict[str, str]:
        """A sandboxed program's environment for this session."""
        return self.proxy.client_env(self.session, HOME=str(self.home), **extra)


@contextlib.asynccontextmanager
async def github_behind_proxy(
    tmp_path: Path,
    *,
    org: str = "acme",
    repos: Mapping[str, Mapping[str, str] | None] | None = None,
    allow: Sequence[str] = GITHUB_HOSTS,
    proxy_allow: Sequence[str] = GITHUB_HOSTS,
    github_app: bool = False,
    store: str = "memory",
    proxy_args: Sequence[str] = (),
    **github_kwargs: Any,
) -> AsyncIterator[GitHubBehindProxy]:
    """Start both, create ``repos`` (name -> files, or None for the default files).

    ``github_app``: the proxy is started with the fake's GitHub App (id, key,
    API URL), so leases may name ``provider: "github_app"``. ``store`` and
    ``proxy_args`` go to the proxy as they are.
    """
    async with FakeGitHub(tmp_path / "github", org=org, **github_kwargs) as gh:
        for name, files in (repos or {}).items():
            if files is None:
                await gh.create_repo(name)
            else:
                await gh.create_repo(name, files=dict(files))
        extra: list[str] = []
        if github_app:
            key = tmp_path / "app-key.pem"
            key.write_text(gh.app_private_key_pem)
            key.chmod(0o600)
            extra = [
                "--github-app-id", str(gh.app_id),
                "--github-app-key-file", str(key),
                "--github-api-url", gh.api_url,
            ]  # fmt: skip
        async with proxy_for(
            gh, tmp_path / "proxy", allow=proxy_allow, store=store, extra_args=[*extra, *proxy_args]
        ) as proxy:
            pc = proxy.client()
            try:
                session = await pc.create_session(allow=list(allow))
                home = tmp_path / "home"
                home.mkdir(exist_ok=True)
                yield GitHubBehindProxy(gh, proxy, pc, session, home)
            finally:
                await pc.aclose()
