"""``airlock tools`` and ``airlock call``: the daemon's catalogue and any tool, from a shell."""

from __future__ import annotations

import argparse
import json
import sys

from ..daemon import AirlockError
from .connection import connect, daemon_command, print_json


async def _tools(args: argparse.Namespace) -> int:
    async with connect(args) as client:
        tools = await client.tools()
    if args.json:
        print_json([t.model_dump(mode="json") for t in tools])
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
    async with connect(args) as client:
        try:
            result = await client.call(args.tool, payload)
        except AirlockError as exc:
            print_json(exc.to_envelope())
            return 1
    print_json(result)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tools = daemon_command(sub, "tools", "list airlockd's tools", _tools)
    tools.add_argument("--json", action="store_true", help="print the full catalogue as JSON")

    call = daemon_command(sub, "call", "call one airlockd tool with a JSON input", _call)
    call.add_argument("tool", help="tool name, e.g. file_read")
    call.add_argument("input", nargs="?", default="{}", help="JSON object, or - for stdin")
