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
    p = argparse.ArgumentParser(prog="airlockd", description="The airlock daemon inside a sandbox.")
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
        "--listen", help="also serve TCP, e.g. tcp://127.0.0.1:7070 (needs --token-file)"
    )
    p.add_argument("--config", type=Path, help="TOML or JSON file with the same keys as the flags")
    p.add_argument("--socket-mode", default="0660", help="socket file mode, octal (default 0660)")
    p.add_argument(
        "--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES, help="largest request body"
    )
    p.add_argument("--log-level", default="INFO", help="logging level")
    p.add_argument(
        "--exec-spill-max-bytes",
        type=int,
        help="most bytes one exec may spill to the artifacts dir (default 256 MiB)",
    )
    p.add_argument(
        "--artifacts-quota-bytes",
        type=int,
        help="spill files in the artifacts dir stay under this; oldest removed first (default 1 GiB)",
    )
    p.add_argument(
        "--tooling-key",
        action="store_true",
        help="print the sandbox tooling revalidation key and exit",
    )
    return p


def _load_config_file(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    return {k.replace("-", "_"): v for k, v in data.items()}


def resolve_args(args: argparse.Namespace) -> argparse.Namespace:
    """Config file values fill in whatever the command line left unset."""
    if args.config is None:
        return args
    for key, value in _load_config_file(args.config).items():
        current = getattr(args, key, None)
        if current in (None, [], DEFAULT_MAX_BODY_BYTES, "0660", "INFO"):
            if key in ("workspace", "socket", "artifacts_dir", "state_dir", "token_file", "config"):
                value = Path(value)
            elif key == "extra_root":
                value = [Path(v) for v in value]
            setattr(args, key, value)
    return args


async def serve(args: argparse.Namespace) -> int:
    socket_path: Path = args.socket.absolute()
    base = socket_path.parent
    config = DaemonConfig(
        workspace=args.workspace,
        extra_roots=tuple(args.extra_root),
        artifacts_dir=args.artifacts_dir or base / "artifacts",
        state_dir=args.state_dir or base / "state",
        **{
            key: getattr(args, key)
            for key in ("exec_spill_max_bytes", "artifacts_quota_bytes")
            if getattr(args, key, None) is not None
        },
    )
    workspace = Workspace(config)
    # Only the real daemon process adopts orphans (an embedding process, e.g. pytest, must not).
    workspace.ctx.procs.become_subreaper()
    await workspace.startup()
    app = build_app(workspace, token_file=args.token_file)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=30.0, access_log=None)
    await runner.setup()
    claim_socket_path(socket_path)
    unix_site = web.UnixSite(runner, str(socket_path))
    await unix_site.start()
    os.chmod(socket_path, int(args.socket_mode, 8))
    if args.listen:
        url = urlparse(args.listen)
        tcp_app = build_app(workspace, token_file=args.token_file, require_token=True)
        tcp_runner = web.AppRunner(tcp_app, handler_cancellation=True, access_log=None)
        await tcp_runner.setup()
        await web.TCPSite(tcp_runner, url.hostname or "127.0.0.1", url.port or 7070).start()
    else:
        tcp_runner = None
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
    parser = build_parser()
    args = resolve_args(parser.parse_args(argv))
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
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        return asyncio.run(serve(args))
    except SocketInUse as exc:
        print(f"airlockd: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
