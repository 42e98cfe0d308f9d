"""The ``airlock`` operator CLI.

Each command group lives in its own module under :mod:`airlock.client.commands`
and registers itself here, so the daemon, proxy and GitHub commands grow
independently over the same clients an orchestrator imports.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import sys
from collections.abc import Sequence

COMMAND_MODULES = ("daemon", "proxy", "gh", "mcp")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airlock",
        description="Operator conveniences over airlockd and airlock-proxy.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"airlock.client.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"airlock.client.commands.{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, run the chosen command and return its exit code.

    Command handlers take the parsed namespace and return an exit code; they may
    be coroutines, which run on a fresh event loop.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = args.func
    try:
        result = handler(args)
        if inspect.iscoroutine(result):
            result = asyncio.run(result)
    except KeyboardInterrupt:
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
