"""``airlockd``: serve a workspace's tools on a Unix socket (and optionally TCP).

Start-up order matters: check the privilege split (``--exec-user``, the state
and artifacts dirs, the token file), recover interrupted patches, then claim
the socket (refusing a live one or anything that is not a socket, replacing a
stale socket), then serve. SIGTERM drains in-flight requests (at most
``--drain-timeout``) and removes the socket; SIGHUP re-reads the token file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import grp
import json
import logging
import os
import signal
import socket
import stat
import sys
import threading
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from aiohttp import web

from airlock.daemon import privsep
from airlock.daemon.auth import TokenFileError, TokenTable
from airlock.daemon.context import DaemonConfig
from airlock.daemon.identity import ExecUser, ExecUserError
from airlock.daemon.server import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_MAX_BODY_BYTES,
    ServerState,
    build_app,
)
from airlock.daemon.transport import ConnectionLimits, EnvelopeRunner, Listener
from airlock.daemon.workspace import Workspace

log = logging.getLogger("airlockd")


class SocketInUse(RuntimeError):
    pass


DEFAULT_DRAIN_TIMEOUT_S = 30.0
_LIMIT_DEFAULTS = ConnectionLimits()


def check_socket_target(path: Path) -> os.stat_result | None:
    """What is at ``--socket`` now: nothing, or a socket; anything else refuses start-up.

    Only a socket is ever removed: a regular file, a directory or a symlink at
    ``--socket`` is someone's data or a mistake, never airlockd's to delete.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISSOCK(st.st_mode):
        raise privsep.StartupRefused(
            f"--socket {path} exists and is not a socket ({_kind(st.st_mode)}); airlockd "
            "only replaces a stale socket: move that file away or choose another --socket"
        )
    return st


def claim_socket_path(path: Path) -> None:
    """Remove a stale socket file; refuse a live one, and anything that is not a socket."""
    before = check_socket_target(path)
    if before is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except OSError:
        # Unlink only the socket we looked at (not something swapped in meanwhile).
        with contextlib.suppress(FileNotFoundError):
            now = os.lstat(path)
            if (now.st_dev, now.st_ino) == (before.st_dev, before.st_ino):
                path.unlink()
                log.info("replaced stale socket %s", path)
        return
    finally:
        probe.close()
    raise SocketInUse(f"{path} is served by a running process; stop it or choose another --socket")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISFIFO, "a FIFO"),
    ):
        if test(mode):
            return name
    return "a special file"


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
        "--socket-group",
        help="group that owns the socket file (the orchestrator's; never one the exec user is in)",
    )
    p.add_argument(
        "--exec-user",
        metavar="USER[:GROUP]",
        help="run exec and every program it starts as this user (default: airlockd's own user)",
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        help=f"seconds to receive a request head (default {_LIMIT_DEFAULTS.header_timeout_s:g})",
    )
    p.add_argument(
        "--keepalive-timeout",
        type=float,
        help=f"seconds an idle connection stays open (default "
        f"{_LIMIT_DEFAULTS.keepalive_timeout_s:g})",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        help=f"connections per listener; beyond it 503 (default {_LIMIT_DEFAULTS.max_connections})",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        help=f"seconds to receive a request body (default {DEFAULT_BODY_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--drain-timeout",
        type=float,
        help=f"seconds SIGTERM waits for requests in flight (default {DEFAULT_DRAIN_TIMEOUT_S:g})",
    )
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


def _limits(args: argparse.Namespace) -> ConnectionLimits:
    d = _LIMIT_DEFAULTS
    return ConnectionLimits(
        header_timeout_s=d.header_timeout_s if args.header_timeout is None else args.header_timeout,
        keepalive_timeout_s=(
            d.keepalive_timeout_s if args.keepalive_timeout is None else args.keepalive_timeout
        ),
        max_connections=d.max_connections if args.max_connections is None else args.max_connections,
    )


def _own_socket(path: Path, mode: str, group: str | None) -> None:
    """The socket's mode and group: the orchestrator connects through the group bit."""
    if group is not None:
        gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
        os.chown(path, -1, gid)
    os.chmod(path, int(mode, 8))


async def serve(args: argparse.Namespace, exec_user: ExecUser | None) -> int:
    socket_path: Path = args.socket.absolute()
    base = socket_path.parent
    config = DaemonConfig(
        workspace=args.workspace,
        extra_roots=tuple(args.extra_root),
        artifacts_dir=args.artifacts_dir or base / "artifacts",
        state_dir=args.state_dir or base / "state",
        exec_user=exec_user,
        **{
            key: getattr(args, key)
            for key in ("exec_spill_max_bytes", "artifacts_quota_bytes")
            if getattr(args, key, None) is not None
        },
    )
    privsep.prepare(
        state=config.state,
        artifacts=config.artifacts,
        roots=[config.workspace, *config.extra_roots],
        token_file=args.token_file,
        user=exec_user,
    )
    state = ServerState(args.token_file)
    workspace = Workspace(config)
    # Only the real daemon process adopts orphans (an embedding process, e.g. pytest, must not).
    workspace.ctx.procs.become_subreaper()
    await workspace.startup()
    limits = _limits(args)
    drain = DEFAULT_DRAIN_TIMEOUT_S if args.drain_timeout is None else args.drain_timeout
    body_timeout = DEFAULT_BODY_TIMEOUT_S if args.body_timeout is None else args.body_timeout

    def runner_for(name: str, require_token: bool) -> EnvelopeRunner:
        app = build_app(
            workspace,
            state=state,
            require_token=require_token,
            max_body_bytes=args.max_body_bytes,
            body_timeout_s=body_timeout,
        )
        return EnvelopeRunner(
            app,
            listener=Listener(name, limits, state.metrics),
            handler_cancellation=True,
            shutdown_timeout=drain,
            access_log=None,
        )

    runners = [runner_for("unix", require_token=False)]
    await runners[0].setup()
    claim_socket_path(socket_path)
    unix_site = web.UnixSite(runners[0], str(socket_path))
    await unix_site.start()
    _own_socket(socket_path, args.socket_mode, args.socket_group)
    if args.listen:
        url = urlparse(args.listen)
        runners.append(runner_for("tcp", require_token=True))
        await runners[1].setup()
        await web.TCPSite(runners[1], url.hostname or "127.0.0.1", url.port or 7070).start()
    log.info("airlockd serving %s on %s", config.workspace, socket_path)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)

    def reload() -> None:
        try:
            state.reload_tokens()
        except (OSError, ValueError) as exc:
            kept = len(state.tokens.entries) if state.tokens is not None else 0
            log.error("token file not reloaded, keeping the previous %d token(s): %s", kept, exc)

    loop.add_signal_handler(signal.SIGHUP, reload)
    try:
        await stop.wait()
    finally:
        log.info("draining (at most %g s) and shutting down", drain)
        await asyncio.gather(*(r.cleanup() for r in runners), return_exceptions=True)
        try:
            await asyncio.wait_for(workspace.aclose(), timeout=5.0)
        except TimeoutError:
            log.error("workspace helpers did not stop within 5 s; exiting anyway")
        # aiohttp's UnixSite leaves the file behind; a clean stop removes it.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)
    return 0


def _run(args: argparse.Namespace, exec_user: ExecUser | None) -> int:
    """``asyncio.run`` without its final wait for executor threads.

    A worker thread stuck in a system call (a read the kernel never finishes)
    would make ``asyncio.run`` (and interpreter exit) wait forever, so SIGTERM
    would not stop the daemon. After the drain the loop is closed without
    joining them, and if any thread is still alive after a short grace, the
    process exits without waiting for it.
    """
    loop = asyncio.new_event_loop()
    try:
        code = loop.run_until_complete(serve(args, exec_user))
    finally:
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.wait(pending, timeout=2.0))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()  # shuts the default executor down without waiting
    stuck = threading.Event()
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(timeout=0.5)
            if thread.is_alive():
                log.error("a worker thread is still blocked at exit; exiting without it")
                stuck.set()
    if stuck.is_set():
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


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
    exec_user: ExecUser | None = None
    if args.exec_user:
        try:
            exec_user = ExecUser.parse(args.exec_user)
        except ExecUserError as exc:
            return _refuse(str(exc))
    if args.socket_group is not None and not args.socket_group.isdigit():
        try:
            grp.getgrnam(args.socket_group)
        except KeyError:
            return _refuse(f"--socket-group {args.socket_group!r}: no such group on this machine")
    try:
        check_socket_target(args.socket.absolute())
    except privsep.StartupRefused as exc:
        return _refuse(str(exc))
    if args.token_file is not None:
        try:
            TokenTable.load(args.token_file)
        except TokenFileError as exc:
            return _refuse(f"--token-file: {exc}")
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        return _run(args, exec_user)
    except privsep.StartupRefused as exc:
        return _refuse(str(exc))
    except SocketInUse as exc:
        print(f"airlockd: {exc}", file=sys.stderr)
        return 1


def _refuse(message: str) -> int:
    """A configuration error: one line on stderr, exit 2, no traceback."""
    print(f"airlockd: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
