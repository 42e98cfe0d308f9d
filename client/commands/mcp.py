"""``airlock mcp``: serve airlockd's tools to an MCP host (stdio, or streamable HTTP).

    airlock mcp --daemon unix:/run/airlock/airlockd.sock --token-env AIRLOCK_TOKEN
    airlock mcp --daemon tcp://127.0.0.1:7070 --token-file tok --http 127.0.0.1:8765 \
        --http-token-file mcp-token

Over HTTP, clients send ``Authorization: Bearer <the token in --http-token-file>``;
a non-loopback --http address is refused without a token file.

With ``--proxy-control`` and a credential provider (``--app-id``/``--app-key-file``,
``--token-command`` or ``--github-token-env``) plus ``--github-org`` and
``--session``, the GitHub shell tool (``github_shell``) is served too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

DAEMON_ENV = "AIRLOCK_DAEMON"


class UsageError(Exception):
    """A flag is wrong: one line for stderr, exit 2."""


def daemon_client_kwargs(address: str) -> dict[str, Any]:
    """``unix:PATH`` → ``socket=PATH``; ``tcp://HOST:PORT`` → ``url=http://HOST:PORT``."""
    if address.startswith("unix:") and len(address) > len("unix:"):
        return {"socket": address[len("unix:") :]}
    if address.startswith("tcp://") and ":" in address[len("tcp://") :]:
        return {"url": "http://" + address[len("tcp://") :].rstrip("/")}
    raise UsageError(f"--daemon {address!r}: give unix:PATH or tcp://HOST:PORT")


def _token(args: argparse.Namespace) -> str | None:
    if args.token_file and args.token_env:
        raise UsageError("give one of --token-file and --token-env")
    if args.token_file:
        try:
            return Path(args.token_file).read_text().strip() or None
        except OSError as exc:
            raise UsageError(f"--token-file {args.token_file}: {exc.strerror}") from None
    if args.token_env:
        value = os.environ.get(args.token_env, "").strip()
        if not value:
            raise UsageError(f"--token-env {args.token_env}: the variable is empty or unset")
        return value
    return None


def _http_token(args: argparse.Namespace) -> str | None:
    """The bearer token MCP clients must send over --http (from --http-token-file)."""
    if not args.http_token_file:
        return None
    if not args.http:
        raise UsageError("--http-token-file is for --http; stdio needs no token")
    try:
        token = Path(args.http_token_file).read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UsageError(f"--http-token-file {args.http_token_file}: {reason}") from None
    if not token or any(c.isspace() for c in token):
        raise UsageError(
            f"--http-token-file {args.http_token_file}: give one token (no spaces) on one line"
        )
    return token


def _http_address(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--http {value!r}: give HOST:PORT, e.g. 127.0.0.1:8765")
    return host.strip("[]"), int(port)


def _prepare_github(args: argparse.Namespace) -> None:
    """Blocking set-up of github_shell (key and token files) before the loop starts."""
    from .gh import _provider

    args.provider = None
    if not args.proxy_control:
        return
    if not (args.github_org and args.session):
        raise UsageError("--proxy-control needs --github-org and --session for github_shell")
    ns = argparse.Namespace(
        app_id=args.app_id,
        app_key_file=args.app_key_file,
        installation_id=args.installation_id,
        org=args.github_org,
        api_url=args.github_api_url,
        api_ca_file=args.github_api_ca_file,
        token_command=args.token_command,
        token_env=args.github_token_env,
    )
    try:
        args.provider = _provider(ns)
        args.proxy_token = (
            Path(args.proxy_token_file).read_text().strip() if args.proxy_token_file else None
        )
    except (ValueError, OSError) as exc:
        raise UsageError(f"github_shell: {exc}") from None


async def _github_tool(args: argparse.Namespace, client: Any) -> Any:
    """The github_shell ExtraTool when the proxy and a credential provider are configured."""
    from ..github.shell import GitHubShell
    from ..mcp import ExtraTool
    from ..proxy import ProxyClient
    from ..sandboxes import DaemonSandbox

    proxy = ProxyClient(args.proxy_control, token=args.proxy_token)
    workspace = (await client.health()).workspace
    shell = GitHubShell(
        org=args.github_org,
        provider=args.provider,
        proxy=proxy,
        session=args.session,
        sandbox=DaemonSandbox(client),
        workspace=workspace,
    )
    return ExtraTool(shell.definition(), shell.invoke)


async def _serve(args: argparse.Namespace) -> int:
    from ..daemon import DaemonClient
    from ..errors import ClientError
    from ..mcp import load, serve_http, serve_stdio
    from ..mcp.transports import check_bind, is_loopback

    include = [t.strip() for t in args.tools.split(",") if t.strip()] if args.tools else None
    http = _http_address(args.http) if args.http else None
    if http is not None:
        try:
            check_bind(http[0], args.http_token)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if args.http_token is None and is_loopback(http[0]):
            print(
                "airlock mcp: warning: no --http-token-file; any local user or process that "
                "can reach this port can call the tools",
                file=sys.stderr,
            )
    async with DaemonClient(**daemon_client_kwargs(args.daemon), token=args.token) as client:
        try:
            extra = [await _github_tool(args, client)] if args.proxy_control else []
            app = await load(client, include=include, extra=extra)
        except ClientError as exc:
            print(f"airlock mcp: {exc}", file=sys.stderr)
            return 1
        if include is not None:
            missing = sorted(set(include) - {t.name for t in app.tools})
            if missing:
                raise UsageError(f"--tools: no tool named {', '.join(missing)}")
        if http is not None:
            print(f"airlock mcp: serving http://{http[0]}:{http[1]}/mcp", file=sys.stderr)
            await serve_http(app, *http, token=args.http_token)
        else:
            await serve_stdio(app)
    return 0


def _main(args: argparse.Namespace) -> int:
    try:
        import mcp  # noqa: F401
    except ImportError:
        print("airlock mcp: needs the mcp extra: pip install 'airlock[mcp]'", file=sys.stderr)
        return 2
    try:
        args.token = _token(args)
        args.http_token = _http_token(args)
        _prepare_github(args)
        return asyncio.run(_serve(args))
    except UsageError as exc:
        print(f"airlock mcp: {exc}", file=sys.stderr)
        return 2


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve airlockd's tools over MCP (stdio, or streamable HTTP with --http)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--daemon",
        default=os.environ.get(DAEMON_ENV),
        required=DAEMON_ENV not in os.environ,
        help=f"airlockd: unix:PATH or tcp://HOST:PORT (env {DAEMON_ENV})",
    )
    p.add_argument("--token-file", help="file holding the daemon's bearer token")
    p.add_argument("--token-env", help="environment variable holding the daemon's bearer token")
    p.add_argument("--tools", help="serve only these tools, comma-separated")
    p.add_argument("--http", metavar="HOST:PORT", help="streamable HTTP at /mcp instead of stdio")
    p.add_argument(
        "--http-token-file",
        help="file holding the bearer token HTTP clients must send (required off loopback)",
    )
    g = p.add_argument_group("github_shell (served with --proxy-control and credentials)")
    g.add_argument(
        "--proxy-control", help="airlock-proxy control API: unix:PATH or tcp://HOST:PORT"
    )
    g.add_argument("--proxy-token-file", help="control API bearer token file")
    g.add_argument("--session", default=os.environ.get("AIRLOCK_SESSION"), help="proxy session id")
    g.add_argument("--github-org", help="the GitHub organization the tool may act in")
    g.add_argument("--github-api-url", default="https://api.github.com", help="or GHES's /api/v3")
    g.add_argument("--github-api-ca-file", help="extra CA for the GitHub API (GHES)")
    g.add_argument("--app-id", default=os.environ.get("AIRLOCK_GITHUB_APP_ID"))
    g.add_argument("--app-key-file", default=os.environ.get("AIRLOCK_GITHUB_APP_KEY_FILE"))
    g.add_argument("--installation-id", type=int)
    g.add_argument("--token-command", help="command printing a GitHub token")
    g.add_argument("--github-token-env", help="environment variable holding a GitHub token")
    p.set_defaults(func=_main)
