"""``airlock tools`` and ``airlock call``: the daemon's catalogue and any tool, from a shell."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .. import envvars
from ..daemon import AirlockError, DaemonClient

DEFAULT_SOCKET_ENV = envvars.DAEMON_SOCKET
TOKEN_ENV = envvars.DAEMON_TOKEN


def _add_connection(parser: argparse.ArgumentParser) -> None:
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


def _client(args: argparse.Namespace) -> DaemonClient:
    token = args.token or envvars.secret(TOKEN_ENV, envvars.DAEMON_TOKEN_FILE)
    if args.url:
        return DaemonClient(url=args.url, token=token)
    return DaemonClient(socket=args.socket, token=token)


def _print(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


async def _tools(args: argparse.Namespace) -> int:
    async with _client(args) as client:
        tools = await client.tools()
    if args.json:
        _print([t.model_dump(mode="json") for t in tools])
    else:
        for tool in tools:
            flag = "read-only" if tool.read_only else "edits"
            print(f"{tool.name:<18} {flag:<9} {tool.description}")
    return 0


async def _call(args: argparse.Namespace) -> int:
    raw = sys.stdin.read() if args.input == "-" else args.input
    try:
        payload = json.loads(raw)
    except json.JSONDecodeError as exc:
        print(f"airlock call: the input is not JSON ({exc}); pass a JSON object", file=sys.stderr)
        return 2
    async with _client(args) as client:
        try:
            result = await client.call(args.tool, payload)
        except AirlockError as exc:
            _print(exc.to_envelope())
            return 1
    _print(result)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tools = sub.add_parser("tools", help="list airlockd's tools")
    _add_connection(tools)
    tools.add_argument("--json", action="store_true", help="print the full catalogue as JSON")
    tools.set_defaults(func=_tools)

    call = sub.add_parser("call", help="call one airlockd tool with a JSON input")
    _add_connection(call)
    call.add_argument("tool", help="tool name, e.g. file_read")
    call.add_argument("input", nargs="?", default="{}", help="JSON object, or - for stdin")
    call.set_defaults(func=_call)

    from . import files, processes, terminal

    processes.register(sub)  # exec, ps, logs, kill
    terminal.register(sub)  # attach
    files.register(sub)  # cp, watch
