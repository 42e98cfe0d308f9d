#!/usr/bin/env python3
"""An example orchestrator: one agent turn against a running airlock deployment.

It does what a real orchestrator does around a model, without the model:

1. creates a proxy session for the sandbox (its proxy URL becomes the sandbox's
   ``HTTPS_PROXY`` for every command it runs);
2. clones the repository through the GitHub shell tool (``gh repo clone``);
3. applies a patch and searches for it through airlockd;
4. runs ``gh api repos/OWNER/REPO`` through the GitHub shell tool, which mints a
   token, installs a short lease at the proxy, and runs ``gh`` in the sandbox
   with a placeholder;
5. deletes the session.

Configuration comes from flags or the environment (the compose service sets it):

    AIRLOCK_PROXY_CONTROL          unix:/path or tcp://host:port of the proxy control API
    AIRLOCK_PROXY_CONTROL_TOKEN_FILE  bearer token file for a TCP control API (optional)
    AIRLOCK_DAEMON_SOCKET          airlockd's Unix socket (or AIRLOCK_DAEMON_URL + token file)
    AIRLOCK_DAEMON_URL, AIRLOCK_DAEMON_TOKEN_FILE
    AIRLOCK_SANDBOX_PROXY          HOST:PORT the sandbox uses to reach the proxy, if it
                                   differs from the address in the session's proxy_url
    AIRLOCK_REPO                   owner/repo
    AIRLOCK_GITHUB_TOKEN           a token for the repository (StaticTokenProvider), or
    AIRLOCK_GITHUB_APP_ID + AIRLOCK_GITHUB_APP_KEY_FILE (GitHubAppProvider for the owner org)
    AIRLOCK_GITHUB_API_URL         GitHub API base URL (default https://api.github.com)

Run: ``python deploy/orchestrator_example.py`` (exit 0 when every step worked).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from airlock.client import envvars
from airlock.client.daemon import DaemonClient
from airlock.client.github.shell import GitHubShell
from airlock.client.providers import GitHubAppProvider, StaticTokenProvider
from airlock.client.providers.base import TokenProvider
from airlock.client.proxy import ProxyClient
from airlock.client.sandboxes import DaemonSandbox

EXAMPLE_FILE = "AIRLOCK_EXAMPLE.md"


@dataclass(frozen=True)
class Config:
    proxy_control: str
    proxy_token: str | None
    daemon_socket: str | None
    daemon_url: str | None
    daemon_token: str | None
    sandbox_proxy: str | None
    repo: str
    github_token: str | None
    app_id: str | None
    app_key_pem: str | None
    api_url: str


def _read(path: str | None) -> str | None:
    if not path:
        return None
    with open(path, encoding="utf-8") as fh:
        return fh.read().strip().split()[0]


def parse_config(argv: Sequence[str] | None = None) -> Config:
    env = envvars.get  # canonical names; deprecated aliases still work, with a warning
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--proxy-control", default=env("AIRLOCK_PROXY_CONTROL"))
    p.add_argument("--proxy-token-file", default=env("AIRLOCK_PROXY_CONTROL_TOKEN_FILE"))
    p.add_argument("--daemon-socket", default=env("AIRLOCK_DAEMON_SOCKET"))
    p.add_argument("--daemon-url", default=env("AIRLOCK_DAEMON_URL"))
    p.add_argument("--daemon-token-file", default=env("AIRLOCK_DAEMON_TOKEN_FILE"))
    p.add_argument("--sandbox-proxy", default=env("AIRLOCK_SANDBOX_PROXY"))
    p.add_argument("--repo", default=env("AIRLOCK_REPO"))
    p.add_argument("--github-app-id", default=env("AIRLOCK_GITHUB_APP_ID"))
    p.add_argument("--github-app-key-file", default=env("AIRLOCK_GITHUB_APP_KEY_FILE"))
    p.add_argument(
        "--github-api-url", default=env("AIRLOCK_GITHUB_API_URL", "https://api.github.com")
    )
    args = p.parse_args(argv)
    missing = [
        flag
        for flag, value in (("--proxy-control", args.proxy_control), ("--repo", args.repo))
        if not value
    ]
    if not (args.daemon_socket or args.daemon_url):
        missing.append("--daemon-socket or --daemon-url")
    token = env("AIRLOCK_GITHUB_TOKEN") or None
    if not token and not (args.github_app_id and args.github_app_key_file):
        missing.append("AIRLOCK_GITHUB_TOKEN or --github-app-id with --github-app-key-file")
    if missing:
        p.error("missing: " + ", ".join(missing))
    if args.repo.count("/") != 1:
        p.error("--repo must be owner/repo")
    key_pem = None
    if args.github_app_key_file:
        with open(args.github_app_key_file, encoding="utf-8") as fh:
            key_pem = fh.read()
    return Config(
        proxy_control=args.proxy_control,
        proxy_token=_read(args.proxy_token_file),
        daemon_socket=args.daemon_socket,
        daemon_url=args.daemon_url,
        daemon_token=_read(args.daemon_token_file),
        sandbox_proxy=args.sandbox_proxy,
        repo=args.repo,
        github_token=token,
        app_id=args.github_app_id,
        app_key_pem=key_pem,
        api_url=args.github_api_url,
    )


def sandbox_proxy_url(proxy_url: str, override: str | None) -> str:
    """The session's proxy URL, with the host:port the sandbox actually reaches."""
    if not override:
        return proxy_url
    parts = urlsplit(proxy_url)
    netloc = f"{parts.username}:{parts.password}@{override}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def provider_for(config: Config) -> TokenProvider:
    if config.github_token:
        return StaticTokenProvider(config.github_token)
    assert config.app_id and config.app_key_pem
    return GitHubAppProvider(
        config.app_id, config.app_key_pem, org=config.repo.split("/")[0], api_url=config.api_url
    )


def step(name: str, ok: bool, detail: str = "") -> None:
    print(json.dumps({"step": name, "ok": ok, "detail": detail[-2000:]}), flush=True)
    if not ok:
        raise SystemExit(1)


async def agent_turn(config: Config, provider: TokenProvider | None = None) -> None:
    owner, name = config.repo.split("/")
    permission = {"provider": "github", "repositories": [config.repo], "access": "write"}
    daemon = (
        DaemonClient(socket=config.daemon_socket, token=config.daemon_token)
        if config.daemon_socket
        else DaemonClient(url=config.daemon_url, token=config.daemon_token)
    )
    async with ProxyClient(config.proxy_control, token=config.proxy_token) as proxy, daemon:
        health = await daemon.health()
        step("daemon_health", health.status == "ok", health.workspace)
        session = await proxy.create_session(allow=["api.github.com", "github.com"], ttl_s=3600)
        step("session_created", True, session.session_id)
        try:
            url = sandbox_proxy_url(session.proxy_url, config.sandbox_proxy)
            shell = GitHubShell(
                org=owner,
                provider=provider or provider_for(config),
                proxy=proxy,
                session=session,
                sandbox=DaemonSandbox(daemon),
                workspace=health.workspace,
                extra_env={
                    "HTTPS_PROXY": url,
                    "HTTP_PROXY": url,
                    "https_proxy": url,
                    "http_proxy": url,
                },
            )

            def call(command: str, cwd: str | None = None) -> dict[str, object]:
                data: dict[str, object] = {
                    "command": command,
                    "permissions": [permission],
                    "description": "airlock example orchestrator",
                }
                if cwd:
                    data["working_directory"] = cwd
                return data

            listing = await daemon.file_list(path=".", depth=1)
            if not any(e.path == name for e in listing.entries):
                clone = await shell.run(call(f"gh repo clone {config.repo}"))
                step("gh_repo_clone", clone.exit_code == 0, clone.stderr)
            patch = (
                "*** Begin Patch\n"
                f"*** Add File: {name}/{EXAMPLE_FILE}\n"
                "+Written through airlock: apply_patch in the sandbox, no token inside it.\n"
                "*** End Patch\n"
            )
            existing = await daemon.file_list(path=name, depth=1)
            if not any(e.path == f"{name}/{EXAMPLE_FILE}" for e in existing.entries):
                patched = await daemon.apply_patch(patch=patch)
                step("apply_patch", bool(patched.files), patched.summary)
            found = await daemon.file_search(pattern="Written through airlock", path=name)
            step("file_search", f"{name}/{EXAMPLE_FILE}" in (found.files or []), str(found.files))
            api = await shell.run(call(f"gh api repos/{config.repo} --jq .full_name"))
            step(
                "gh_api", api.exit_code == 0 and config.repo in api.stdout, api.stdout + api.stderr
            )
        finally:
            await proxy.delete_session(session.session_id)
            step("session_deleted", True, session.session_id)


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_config(argv)
    try:
        asyncio.run(agent_turn(config))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
