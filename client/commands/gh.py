"""``airlock gh --org O --repo O/R -- <command>``: the GitHub shell tool for operators.

Runs one command exactly as a model's tool call would (same approve, target
checks, lease, redaction), which makes it the quickest way to check a
deployment end to end. Where it runs:

- default: in the sandbox behind airlockd (``--socket``/``--url``), under an
  existing proxy session (``--session``, whose proxy URL the sandbox already uses);
- ``--local``: on this machine, under a temporary proxy session created for the
  command (deleted afterwards), trusting the proxy CA fetched from the control API.

Credentials: a GitHub App (``--app-id`` + ``--app-key-file``), an operator
command (``--token-command 'gh auth token'``) or an environment variable
(``--token-env``). Real tokens are never accepted in argv.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import ssl
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .. import envvars
from ..github.shell import GitHubShell, GitHubShellDenied
from ..providers import (
    CommandTokenProvider,
    CredentialError,
    GitHubAppProvider,
    StaticTokenProvider,
    TokenProvider,
)
from ..proxy import ProxyClient, ProxyError
from ..sandboxes import DaemonSandbox, LocalSandbox, Sandbox
from .connection import DEFAULT_PROXY_CONTROL


def _provider(args: argparse.Namespace) -> TokenProvider:
    if args.app_id:
        if not args.app_key_file:
            raise ValueError("--app-id needs --app-key-file")
        ctx = ssl.create_default_context(cafile=args.api_ca_file) if args.api_ca_file else None
        return GitHubAppProvider(
            args.app_id,
            Path(args.app_key_file).read_bytes(),
            installation_id=args.installation_id,
            org=args.org,
            api_url=args.api_url,
            ssl_context=ctx,
        )
    if args.token_command:
        return CommandTokenProvider(shlex.split(args.token_command))
    if args.token_env:
        value = os.environ.get(args.token_env, "")
        if not value:
            raise ValueError(f"environment variable {args.token_env} is empty")
        return StaticTokenProvider(value)
    raise ValueError("give credentials: --app-id/--app-key-file, --token-command or --token-env")


def _with_address(proxy_url: str, address: str | None) -> str:
    if not address:
        return proxy_url
    parts = urlsplit(proxy_url)
    auth = parts.netloc.rpartition("@")[0]
    return urlunsplit((parts.scheme, f"{auth}@{address}" if auth else address, "", "", ""))


@asynccontextmanager
async def _local_sandbox(
    args: argparse.Namespace, proxy: ProxyClient
) -> AsyncIterator[tuple[Sandbox, str, str]]:
    """A LocalSandbox under a temporary session; yields (sandbox, session id, workspace)."""
    session = await proxy.create_session(
        allow=[args.api_host, args.git_host], ttl_s=int(args.timeout) + 120
    )
    try:
        ca = Path(args.tmp_dir) / "proxy-ca.pem"
        await asyncio.to_thread(ca.write_text, await proxy.ca_pem())
        url = _with_address(session.proxy_url, args.proxy_address)
        env = {
            k: v
            for k, v in os.environ.items()
            if k.lower() not in {"https_proxy", "http_proxy", "all_proxy", "no_proxy"}
        }
        env.update(
            HTTPS_PROXY=url,
            HTTP_PROXY=url,
            NO_PROXY="",
            SSL_CERT_FILE=str(ca),
            GIT_SSL_CAINFO=str(ca),
            CURL_CA_BUNDLE=str(ca),
        )
        yield LocalSandbox(base_env=env), session.session_id, args.workspace
    finally:
        await proxy.delete_session(session.session_id)


def _main(args: argparse.Namespace) -> int:
    """Blocking preparation (files, temp dir) here; the async part runs on its own loop."""
    if args.control_token_file:
        args.control_token = Path(args.control_token_file).read_text().strip()
    else:
        args.control_token = envvars.secret(
            envvars.PROXY_CONTROL_TOKEN, envvars.PROXY_CONTROL_TOKEN_FILE
        )
    if args.local:
        args.workspace = str(Path(args.workspace or ".").resolve())
    try:
        args.provider = _provider(args)
    except (ValueError, OSError) as exc:
        print(f"airlock gh: {exc}", file=sys.stderr)
        return 2
    args.tmp_dir = tempfile.mkdtemp(prefix="airlock-gh-")
    try:
        return asyncio.run(_run(args))
    finally:
        shutil.rmtree(args.tmp_dir, ignore_errors=True)


async def _run(args: argparse.Namespace) -> int:
    command_argv = list(args.cmd)
    if command_argv and command_argv[0] == "--":
        command_argv = command_argv[1:]
    if not command_argv:
        print("airlock gh: give the command after --", file=sys.stderr)
        return 2
    command = command_argv[0] if len(command_argv) == 1 else shlex.join(command_argv)
    provider: TokenProvider = args.provider
    data: dict[str, Any] = {
        "command": command,
        "permissions": [{"provider": "github", "repositories": [args.repo], "access": "write"}],
        "description": args.description,
    }
    if args.working_directory:
        data["working_directory"] = args.working_directory
    try:
        async with ProxyClient(args.control, token=args.control_token) as proxy:
            if args.local:
                async with _local_sandbox(args, proxy) as (sandbox, sid, workspace):
                    result = await _shell(args, provider, proxy, sid, sandbox, workspace).run(data)
            else:
                result = await _remote(args, provider, proxy, data)
    except GitHubShellDenied as exc:
        print(f"airlock gh: denied: {exc.reason}", file=sys.stderr)
        return 3
    except CredentialError as exc:
        print(f"airlock gh: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 4
    except ProxyError as exc:
        print(f"airlock gh: proxy error {exc.code} ({exc.status}): {exc.message}", file=sys.stderr)
        return 5
    if args.json:
        print(json.dumps(result.model_dump(), indent=2))
        return 0
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    if result.timed_out:
        print("airlock gh: the command timed out", file=sys.stderr)
    return result.exit_code if result.exit_code is not None else 124


async def _remote(
    args: argparse.Namespace, provider: TokenProvider, proxy: ProxyClient, data: dict[str, Any]
) -> Any:
    from ..daemon import DaemonClient

    if not args.session:
        raise GitHubShellDenied("--session is required unless --local is given")
    client = (
        DaemonClient(url=args.url, token=args.daemon_token)
        if args.url
        else DaemonClient(socket=args.socket, token=args.daemon_token)
    )
    async with client:
        workspace = args.workspace or (await client.health()).workspace
        shell = _shell(args, provider, proxy, args.session, DaemonSandbox(client), workspace)
        return await shell.run(data)


def _shell(
    args: argparse.Namespace,
    provider: TokenProvider,
    proxy: ProxyClient,
    session_id: str,
    sandbox: Sandbox,
    workspace: str,
) -> GitHubShell:
    return GitHubShell(
        org=args.org,
        provider=provider,
        proxy=proxy,
        session=session_id,
        sandbox=sandbox,
        workspace=workspace,
        timeout_s=args.timeout,
        api_host=args.api_host,
        git_host=args.git_host,
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "gh",
        help="run one gh/git command through the GitHub shell tool",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--org", required=True, help="the GitHub organization (repositories must be in it)"
    )
    p.add_argument("--repo", required=True, help="the one repository, owner/repo")
    p.add_argument("--description", default="operator command via airlock gh")
    p.add_argument("-C", "--working-directory", help="directory inside the workspace")
    p.add_argument("--workspace", help="workspace path (default: airlockd's, or . with --local)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    g = p.add_argument_group("proxy")
    g.add_argument(
        "--control",
        default=envvars.get(envvars.PROXY_CONTROL, DEFAULT_PROXY_CONTROL),
        help="proxy control API: unix:PATH or tcp://HOST:PORT (env AIRLOCK_PROXY_CONTROL)",
    )
    g.add_argument(
        "--control-token-file", help="bearer token file (env AIRLOCK_PROXY_CONTROL_TOKEN_FILE)"
    )
    g.add_argument("--session", default=envvars.get(envvars.SESSION), help="session id")
    g.add_argument("--proxy-address", help="HOST:PORT to put in the proxy URL (--local)")
    s = p.add_argument_group("sandbox")
    s.add_argument("--local", action="store_true", help="run here under a temporary session")
    s.add_argument("--socket", default=envvars.get(envvars.DAEMON_SOCKET, ".airlock/airlockd.sock"))
    s.add_argument("--url", help="airlockd over TCP")
    s.add_argument("--daemon-token", default=envvars.get(envvars.DAEMON_TOKEN))
    c = p.add_argument_group("credentials")
    c.add_argument("--app-id", default=os.environ.get("AIRLOCK_GITHUB_APP_ID"))
    c.add_argument("--app-key-file", default=os.environ.get("AIRLOCK_GITHUB_APP_KEY_FILE"))
    c.add_argument("--installation-id", type=int)
    c.add_argument("--api-url", default="https://api.github.com", help="or https://GHES/api/v3")
    c.add_argument("--api-ca-file", help="extra CA for the GitHub API (GHES, tests)")
    c.add_argument(
        "--token-command", help="operator command printing a token, e.g. 'gh auth token'"
    )
    c.add_argument("--token-env", help="environment variable holding a token")
    p.add_argument("--api-host", default="api.github.com", help=argparse.SUPPRESS)
    p.add_argument("--git-host", default="github.com", help=argparse.SUPPRESS)
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the command")
    p.set_defaults(func=_main)
