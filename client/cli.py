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

from . import cli_common

COMMAND_MODULES = ("daemon", "processes", "terminal", "files", "proxy", "gh", "mcp")


def build_parser() -> argparse.ArgumentParser:
    parser = cli_common.Parser(
        prog="airlock",
        description="Operator conveniences over airlockd and airlock-proxy.",
    )
    cli_common.add_common_flags(parser)
    parser.add_argument("--log-level", default="WARNING", help="level of airlock's own messages")
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
        cli_common.setup_logging(args.log_level, args.log_format, logger="airlock")
    except cli_common.ConfigError as exc:
        return cli_common.fail("airlock", exc)
    try:
        result = handler(args)
        if inspect.iscoroutine(result):
            result = asyncio.run(result)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one line for an operator, never a traceback
        return _unexpected(args, exc)
    return int(result or 0)


def _unexpected(args: argparse.Namespace, exc: Exception) -> int:
    """Unreachable daemons, unreadable files, bad values: one line, exit 1 (2 for config).

    ``--log-level DEBUG`` logs the traceback as well, for a bug report.
    """
    import logging

    logging.getLogger("airlock.client.cli").debug("command failed", exc_info=exc)
    if isinstance(exc, cli_common.ConfigError | ValueError):
        return cli_common.fail("airlock", exc)
    reason = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        reason = f"{exc.strerror}" + (f": {exc.filename}" if exc.filename else "")
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, OSError) and cause.strerror and cause.strerror not in reason:
        reason = f"{reason} ({cause.strerror})"
    hint = ""
    socket = getattr(args, "socket", None)
    if socket and _looks_unreachable(exc):
        hint = f"; is airlockd running on {socket}? (make run starts one)"
    print(f"airlock: error: {' '.join(reason.split())}{hint}", file=sys.stderr)
    return 1


def _looks_unreachable(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionError | FileNotFoundError) or "onnect" in type(seen).__name__:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


if __name__ == "__main__":
    sys.exit(main())
