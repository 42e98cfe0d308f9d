"""What every airlock binary does the same way: version, logging, config errors.

``airlockd``, ``airlock-proxy``, ``airlock`` and ``airlock-signed-commit`` all
use this module (standard library only, so it imports in every image whatever
extra it installed), so an operator meets one behaviour everywhere:

- ``--version`` prints ``PROG VERSION`` with the version from the installed
  distribution's metadata (never a constant in the source).
- ``--log-format text|json``: ``json`` writes one JSON object a line
  (``ts``, ``level``, ``logger``, ``message``, and ``exc`` for a traceback, plus
  the record's ``fields`` when it has them: an access line's ``traceparent``), for
  log shippers; ``text`` is the human default.
- A configuration error is one line on stderr naming the flag or key,
  ``PROG: error: MESSAGE``, and exit status 2; never a traceback and never
  argparse's multi-line usage dump.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
EXIT_CONFIG = 2


class ConfigError(Exception):
    """A bad flag, config key or file named by the operator; the message names it."""


def version() -> str:
    """The installed distribution's version (``0+unknown`` in a tree never installed)."""
    from airlock import __version__

    return __version__


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line and exit 2.

    Sub-parsers inherit the class, so ``airlock session create --bad`` reads the
    same as ``airlockd --bad``.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_CONFIG, f"{self.prog}: error: {message} (see --help)\n")


def add_common_flags(parser: argparse.ArgumentParser) -> None:
    """``--version`` and ``--log-format`` (the caller keeps its own ``--log-level``)."""
    parser.add_argument(
        "--version",
        action="version",
        version=f"{parser.prog} {version()}",
        help="print the version",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text (default) or json: one JSON object a line on stderr",
    )


class JsonFormatter(logging.Formatter):
    """One JSON object a line; never splits a record over lines."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)  # logger.info(..., extra={"fields": {...}})
        if isinstance(fields, dict):
            out.update(fields)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def check_log_level(level: str, flag: str = "--log-level") -> str:
    """The upper-cased level, or a ConfigError naming ``flag``."""
    name = str(level).upper()
    if name not in LOG_LEVELS:
        raise ConfigError(f"{flag} {level!r}: choose one of {', '.join(LOG_LEVELS)}")
    return name


def setup_logging(
    level: str,
    log_format: str = "text",
    *,
    logger: str | None = None,
    quiet: dict[str, int] | None = None,
) -> None:
    """Install one stderr handler with the chosen format.

    ``logger`` set: that logger gets ``level`` and the root stays at WARNING
    (libraries are quiet); unset: the root gets ``level``. ``quiet`` pins
    named loggers (e.g. mitmproxy) to a level of their own.
    """
    name = check_log_level(level)
    if log_format not in LOG_FORMATS:
        raise ConfigError(f"--log-format {log_format!r}: choose text or json")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    if logger is None:
        root.setLevel(name)
    else:
        root.setLevel(logging.WARNING)
        logging.getLogger(logger).setLevel(name)
    for other, other_level in (quiet or {}).items():
        logging.getLogger(other).setLevel(other_level)


def fail(prog: str, message: object) -> int:
    """Print the one-line configuration error and return the exit status for it."""
    text = " ".join(str(message).split()) or "configuration error"
    print(f"{prog}: error: {text}", file=sys.stderr)
    return EXIT_CONFIG


def run_guarded(prog: str, body: Callable[[], int], *errors: type[BaseException]) -> int:
    """Run ``body``; ConfigError (and ``errors``) become one line and exit 2."""
    caught: tuple[type[BaseException], ...] = (ConfigError, *errors)
    try:
        return body()
    except caught as exc:
        return fail(prog, exc)


class _RaisingParser(Parser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def _suppressed(factory: Callable[[], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """A fresh parser from ``factory`` that records only what it was given."""
    parser = factory()
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    return parser


def explicit_args(
    factory: Callable[[], argparse.ArgumentParser], argv: list[str] | None
) -> dict[str, Any]:
    """The flags the command line actually gave (dest -> parsed value)."""
    parser = _suppressed(factory)
    return vars(parser.parse_args(sys.argv[1:] if argv is None else argv))


def config_args(
    factory: Callable[[], argparse.ArgumentParser],
    items: dict[str, Any],
    source: str,
    *,
    forbidden: frozenset[str] = frozenset({"config", "help", "version"}),
) -> dict[str, Any]:
    """Config-file keys parsed exactly as the flags of the same name.

    A key is a flag's long name without the dashes (``socket-mode`` or
    ``socket_mode``). Unknown keys, keys naming a flag a file may not set, and
    values of the wrong shape are a ConfigError naming ``source`` and the key.
    """
    parser = _suppressed(factory)
    options = parser._option_string_actions
    tokens: list[str] = []
    for key, value in items.items():
        flag = "--" + str(key).replace("_", "-")
        action = options.get(flag)
        if action is None or action.dest in forbidden or not action.option_strings:
            raise ConfigError(f"{source}: unknown key {key!r}")
        where = f"{source}: key {key!r}"
        if action.nargs == 0:  # store_true / store_false
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: expected true or false")
            if value == isinstance(action, argparse._StoreTrueAction):
                tokens.append(flag)
            continue
        values = value if isinstance(action, argparse._AppendAction) else [value]
        if isinstance(action, argparse._AppendAction) and not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list")
        for one in values:
            if isinstance(one, bool) or not isinstance(one, str | int | float):
                raise ConfigError(f"{where}: expected a string or a number, got {one!r}")
            tokens.append(f"{flag}={one}")
    parser.error = _RaisingParser.error.__get__(parser)  # type: ignore[method-assign]
    try:
        return vars(parser.parse_args(tokens))
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def apply_config(
    args: argparse.Namespace,
    factory: Callable[[], argparse.ArgumentParser],
    argv: list[str] | None,
    items: dict[str, Any],
    source: str,
) -> argparse.Namespace:
    """Layer a config file under the command line: an explicit flag always wins."""
    from_file = config_args(factory, items, source)
    given = explicit_args(factory, argv)
    for key, value in from_file.items():
        if key not in given:
            setattr(args, key, value)
    return args


def peek_log_format(argv: list[str]) -> str:
    """``--log-format`` from an argv before (or without) the full parse."""
    for i, arg in enumerate(argv):
        if arg == "--log-format" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--log-format="):
            return arg.split("=", 1)[1]
    return "text"


def error_line(prog: str, message: str, log_format: str) -> str:
    """One line for a fatal error, as text or as a JSON log record."""
    text = " ".join(message.split())
    if log_format == "json":
        record = logging.LogRecord(prog, logging.ERROR, prog, 0, text, None, None)
        return JsonFormatter().format(record)
    return f"{prog}: error: {text}"
