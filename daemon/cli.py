"""``airlockd``: serve a workspace's tools on a Unix socket (and optionally TCP).

Start-up order matters: recover interrupted patches first, then claim the
socket (refusing a live one, replacing a stale one), then serve. SIGTERM
drains in-flight requests and removes the socket; SIGHUP re-reads the token
file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from aiohttp import web

from airlock.client.cli_common import (
    ConfigError,
    Parser,
    add_common_flags,
    apply_config,
    check_log_level,
    run_guarded,
    setup_logging,
)
from airlock.daemon.context import DaemonConfig
from airlock.daemon.server import DEFAULT_MAX_BODY_BYTES, STATE_KEY, build_app
from airlock.daemon.workspace import Workspace

log = logging.getLogger("airlockd")


class SocketInUse(RuntimeError):
    pass


def claim_socket_path(path: Path) -> None:
    """Remove a stale socket file; refuse if a live daemon answers on it."""
    if not path.exists() and not path.is_symlink():
        path.parent.mkdir(parents=True, exist_ok=True)
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError, OSError):
        path.unlink(missing_ok=True)
        log.info("replaced stale socket %s", path)
        return
    finally:
        probe.close()
    raise SocketInUse(f"{path} is served by a running process; stop it or choose another --socket")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="airlockd", description="The airlock daemon inside a sandbox.")
    add_common_flags(p)
    p.add_argument("--workspace", type=Path, help="directory the tools work in (required)")
    p.add_argument("--socket", type=Path, help="Unix socket path to serve on (required)")
    p.add_argument(
        "--extra-root",
        type=Path,
        action="append",
        default=[],
        help="another directory absolute paths may reach",
    )
    p.add_argument(
        "--artifacts-dir",
        type=Path,
        help="where exec spills long output (default: beside the socket)",
    )
    p.add_argument(
        "--state-dir", type=Path, help="where patch journals live (default: beside the socket)"
    )
    p.add_argument("--token-file", type=Path, help="'TOKEN SCOPE' lines; enables bearer auth")
    p.add_argument(
        "--listen",
        help="also serve tcp://HOST:PORT or unix:PATH (needs --token-file)",
    )
    p.add_argument("--config", type=Path, help="TOML or JSON file with the same keys as the flags")
    p.add_argument("--socket-mode", default="0660", help="socket file mode, octal (default 0660)")
    p.add_argument(
        "--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES, help="largest request body"
    )
    p.add_argument("--log-level", default="INFO", help="logging level")
    p.add_argument(
        "--tooling-key",
        action="store_true",
        help="print the sandbox tooling revalidation key and exit",
    )
    return p


def _load_config_file(path: Path) -> dict[str, Any]:
    """The file's keys, or a ConfigError naming the file (never a traceback)."""
    try:
        text = path.read_text(encoding="utf-8")
        data: Any = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--config {path}: cannot read it ({exc})") from None
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"--config {path}: not valid {_kind(path)}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: expected a table of keys")
    return data


def _kind(path: Path) -> str:
    return "JSON" if path.suffix == ".json" else "TOML"


def resolve_args(args: argparse.Namespace, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Config file values fill in whatever the command line did not give.

    Keys are the flags' long names; an unknown key is refused, and a flag given
    on the command line always wins over the file.
    """
    if args.config is None:
        return args
    items = _load_config_file(args.config)
    argv_list = None if argv is None else list(argv)
    return apply_config(args, build_parser, argv_list, items, f"--config {args.config}")


def parse_listen_url(value: str) -> tuple[str, str, int]:
    """``tcp://HOST:PORT`` -> ("tcp", host, port); ``unix:PATH`` -> ("unix", path, 0).

    A bare ``HOST:PORT`` is refused: it once bound a default address silently.
    """
    if value.startswith("unix:"):
        path = value[len("unix:") :]
        if not path:
            raise ConfigError(f"--listen {value!r}: unix: needs a path, e.g. unix:/run/x.sock")
        return "unix", path, 0
    if value.startswith("tcp://"):
        url = urlparse(value)
        try:
            port = url.port
        except ValueError:
            port = None
        if not url.hostname or port is None or url.path not in ("", "/"):
            raise ConfigError(f"--listen {value!r}: expected tcp://HOST:PORT")
        return "tcp", url.hostname, port
    raise ConfigError(
        f"--listen {value!r}: expected tcp://HOST:PORT or unix:PATH (a bare HOST:PORT is refused)"
    )


def parse_socket_mode(value: str) -> int:
    """An octal file mode no wider than 0777, or a ConfigError naming the flag."""
    try:
        mode = int(str(value), 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o777:
        raise ConfigError(f"--socket-mode {value!r}: expected an octal mode such as 0660")
    return mode


def check_args(args: argparse.Namespace) -> None:
    """Everything that can be checked before binding anything, as ConfigErrors."""
    check_log_level(args.log_level)
    parse_socket_mode(args.socket_mode)
    if args.listen:
        parse_listen_url(args.listen)
    if args.token_file is not None:
        from airlock.daemon.auth import TokenTable

        try:
            TokenTable.load(args.token_file)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--token-file {args.token_file}: {exc}") from None


async def serve(args: argparse.Namespace) -> int:
    socket_path: Path = args.socket.absolute()
    base = socket_path.parent
    config = DaemonConfig(
        workspace=args.workspace,
        extra_roots=tuple(args.extra_root),
        artifacts_dir=args.artifacts_dir or base / "artifacts",
        state_dir=args.state_dir or base / "state",
    )
    workspace = Workspace(config)
    await workspace.startup()
    app = build_app(workspace, token_file=args.token_file)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=30.0, access_log=None)
    await runner.setup()
    try:
        claim_socket_path(socket_path)
        await web.UnixSite(runner, str(socket_path)).start()
    except OSError as exc:
        await runner.cleanup()
        await workspace.aclose()
        raise ConfigError(
            f"--socket {socket_path}: cannot listen ({exc.strerror or exc})"
        ) from None
    os.chmod(socket_path, parse_socket_mode(args.socket_mode))
    tcp_runner: web.AppRunner | None = None
    if args.listen:
        kind, where, port = parse_listen_url(args.listen)
        tcp_app = build_app(workspace, token_file=args.token_file, require_token=True)
        tcp_runner = web.AppRunner(tcp_app, handler_cancellation=True, access_log=None)
        await tcp_runner.setup()
        site: web.BaseSite = (
            web.TCPSite(tcp_runner, where, port)
            if kind == "tcp"
            else web.UnixSite(tcp_runner, where)
        )
        try:
            await site.start()
        except OSError as exc:
            # Nothing is left behind: not the socket file, not the workspace's threads.
            await tcp_runner.cleanup()
            await runner.cleanup()
            await workspace.aclose()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(socket_path)
            raise ConfigError(
                f"--listen {args.listen}: cannot listen ({exc.strerror or exc})"
            ) from None
    log.info("airlockd serving %s on %s", config.workspace, socket_path)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)

    def reload() -> None:
        for a in (app, *([tcp_runner.app] if tcp_runner else [])):
            try:
                a[STATE_KEY].reload_tokens()
            except (OSError, ValueError) as exc:
                log.error("token file not reloaded: %s", exc)

    loop.add_signal_handler(signal.SIGHUP, reload)
    try:
        await stop.wait()
    finally:
        log.info("draining and shutting down")
        await runner.cleanup()
        if tcp_runner is not None:
            await tcp_runner.cleanup()
        await workspace.aclose()
        # aiohttp's UnixSite leaves the file behind; a clean stop removes it.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_guarded("airlockd", lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = resolve_args(parser.parse_args(argv), argv)
    if args.tooling_key:
        from airlock.daemon.tooling_key import tooling_key

        print(tooling_key())
        return 0
    if args.workspace is None or args.socket is None:
        parser.error("--workspace and --socket are required")
    if not args.workspace.is_dir():
        parser.error(f"--workspace {args.workspace} is not a directory")
    if args.listen and args.token_file is None:
        parser.error("--listen needs --token-file: a TCP listener always requires a token")
    check_args(args)
    setup_logging(args.log_level, args.log_format)
    try:
        return asyncio.run(serve(args))
    except SocketInUse as exc:
        print(f"airlockd: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
