"""How every airlockd command reaches the daemon: the shared flags, the client, the JSON printer.

``tools``, ``call``, ``exec``, ``ps``, ``logs``, ``kill``, ``attach``, ``cp`` and
``watch`` all take the same ``--socket``/``--url``/``--token`` and print JSON the
same way; they live here so each command module imports this one and none
imports another command module.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from .. import envvars
from ..daemon import DaemonClient

DEFAULT_SOCKET_ENV = envvars.DAEMON_SOCKET
TOKEN_ENV = envvars.DAEMON_TOKEN
# Where ``airlock session/lease`` and ``airlock gh`` find airlock-proxy's control API.
DEFAULT_PROXY_CONTROL = "unix:.airlock/proxy.sock"


def add_connection(parser: argparse.ArgumentParser) -> None:
    """Give a subcommand the flags that say which airlockd to talk to."""
    parser.add_argument(
        "--socket",
        default=envvars.get(DEFAULT_SOCKET_ENV, ".airlock/airlockd.sock"),
        help=f"airlockd's Unix socket (env {DEFAULT_SOCKET_ENV}; default .airlock/airlockd.sock)",
    )
    parser.add_argument("--url", help="airlockd over TCP instead, e.g. http://127.0.0.1:7070")
    parser.add_argument(
        "--token",
        default=None,
        help=f"bearer token (env {envvars.DAEMON_TOKEN_FILE}, a file, or {TOKEN_ENV})",
    )


def daemon_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help: str,
    func: Callable[[argparse.Namespace], Awaitable[int]],
) -> argparse.ArgumentParser:
    """A subcommand that talks to airlockd: its parser, with the connection flags and
    ``func`` as its handler; the caller adds the command's own arguments."""
    parser = sub.add_parser(name, help=help)
    add_connection(parser)
    parser.set_defaults(func=func)
    return parser


def connect(args: argparse.Namespace) -> DaemonClient:
    """The client the connection flags (or the environment) name."""
    token = args.token or envvars.secret(TOKEN_ENV, envvars.DAEMON_TOKEN_FILE)
    if args.url:
        return DaemonClient(url=args.url, token=token)
    return DaemonClient(socket=args.socket, token=token)


def print_json(data: Any) -> None:
    """Indented JSON on stdout, non-ASCII kept readable."""
    json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
