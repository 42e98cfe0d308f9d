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
import concurrent.futures
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

from airlock.client.cli_common import (
    ConfigError,
    Parser,
    add_common_flags,
    apply_config,
    check_log_level,
    run_guarded,
    setup_logging,
)
from airlock.client.tracing import setup_otel

from . import privsep, rights
from .context import DaemonConfig
from .identity import ExecUser, ExecUserError
from .procs.contain import DEFAULT_MAX_PROCESSES, TRACKING_MODES, ContainmentError
from .server import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_MAX_BODY_BYTES,
    ServerState,
    build_app,
)
from .tracing import SPANS
from .transport import (
    LISTEN_BACKLOG,
    ConnectionLimits,
    EnvelopeRunner,
    Listener,
)
from .workspace import Workspace

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
        "--max-unauthenticated-connections",
        type=int,
        help="connections per listener that have not shown a valid token; beyond it the one "
        f"idle the longest is closed (default {_LIMIT_DEFAULTS.max_unauthenticated})",
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
        "--otel",
        action="store_true",
        help="export a span per request (tool calls included) over OTLP/HTTP; the endpoint "
        "comes from OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT (needs the otel extra)",
    )
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
        "--exec-tracking",
        choices=TRACKING_MODES,
        default="auto",
        help="how exec and background processes are tracked so nothing they start outlives "
        "them: a cgroup each (cgroup), the /proc tree with a group tag (tree), or cgroup "
        "where the cgroup tree is writable and tree elsewhere (auto, the default)",
    )
    p.add_argument(
        "--exec-max-processes",
        type=int,
        default=DEFAULT_MAX_PROCESSES,
        help=f"RLIMIT_NPROC of agent commands: processes and threads their user may have "
        f"(default {DEFAULT_MAX_PROCESSES}; 0 for no limit)",
    )
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
        raise ConfigError(f"--config {path}: not valid {_config_format(path)}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: expected a table of keys")
    return data


def _config_format(path: Path) -> str:
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
    if args.exec_max_processes < 0:
        raise ConfigError("--exec-max-processes: give a number of processes, or 0 for no limit")
    if args.token_file is not None:
        from .auth import TokenTable

        try:
            TokenTable.load(args.token_file)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--token-file {args.token_file}: {exc}") from None


def _limits(args: argparse.Namespace) -> ConnectionLimits:
    d = _LIMIT_DEFAULTS
    return ConnectionLimits(
        header_timeout_s=d.header_timeout_s if args.header_timeout is None else args.header_timeout,
        keepalive_timeout_s=(
            d.keepalive_timeout_s if args.keepalive_timeout is None else args.keepalive_timeout
        ),
        max_connections=d.max_connections if args.max_connections is None else args.max_connections,
        max_unauthenticated=(
            d.max_unauthenticated
            if args.max_unauthenticated_connections is None
            else args.max_unauthenticated_connections
        ),
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
    acting = rights.configure(exec_user)
    loop = asyncio.get_running_loop()
    # Every worker of the default executor takes the exec user's filesystem identity
    # when it starts, whenever that is (journal recovery below already uses them).
    loop.set_default_executor(
        concurrent.futures.ThreadPoolExecutor(
            thread_name_prefix="airlockd-worker", initializer=rights.enter_exec_user
        )
    )
    workspace = Workspace(config)
    # Only the real daemon process adopts orphans (an embedding process, e.g. pytest, must not),
    # and only it contains commands (cgroups, OOM scores, RLIMIT_NPROC).
    workspace.ctx.procs.become_subreaper()
    workspace.ctx.procs.contain(args.exec_tracking, args.exec_max_processes)
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
            listener=Listener(
                name,
                limits,
                state.metrics,
                # Without a token file the socket's mode is the access control: no
                # connection is "unauthenticated", only the listener's cap applies.
                authenticate=state.presents_valid_token if args.token_file else None,
            ),
            handler_cancellation=True,
            shutdown_timeout=drain,
            access_log=None,
        )

    runners = [runner_for("unix", require_token=False)]
    await runners[0].setup()
    try:
        claim_socket_path(socket_path)
        await web.UnixSite(runners[0], str(socket_path), backlog=LISTEN_BACKLOG).start()
    except OSError as exc:
        await runners[0].cleanup()
        await workspace.aclose()
        raise ConfigError(
            f"--socket {socket_path}: cannot listen ({exc.strerror or exc})"
        ) from None
    _own_socket(socket_path, args.socket_mode, args.socket_group)
    if args.listen:
        kind, where, port = parse_listen_url(args.listen)
        runners.append(runner_for(kind, require_token=True))
        await runners[1].setup()
        site: web.BaseSite = (
            web.TCPSite(runners[1], where, port, backlog=LISTEN_BACKLOG)
            if kind == "tcp"
            else web.UnixSite(runners[1], where, backlog=LISTEN_BACKLOG)
        )
        try:
            await site.start()
        except OSError as exc:
            # Nothing is left behind: not the socket file, not the workspace's threads.
            for runner in reversed(runners):
                await runner.cleanup()
            await workspace.aclose()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(socket_path)
            raise ConfigError(
                f"--listen {args.listen}: cannot listen ({exc.strerror or exc})"
            ) from None
    # From here on the loop thread, and every thread it starts, acts on the filesystem
    # as the exec user; only rights.as_daemon() blocks lift that (see daemon/rights.py).
    rights.enter_exec_user()
    if acting:
        log.info(
            "workspace file operations run with the filesystem identity of %s (uid %d)",
            exec_user.name if exec_user else "?",
            rights.thread_fs_ids()[0],
        )
    log.info("airlockd serving %s on %s", config.workspace, socket_path)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)

    def reload() -> None:
        try:
            with rights.as_daemon():  # the token file is the daemon's own
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
        with contextlib.suppress(FileNotFoundError), rights.as_daemon():
            os.unlink(socket_path)
        SPANS.shutdown()  # --otel: the last spans leave before the process does
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
    return run_guarded("airlockd", lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = resolve_args(parser.parse_args(argv), argv)
    if args.tooling_key:
        from .tooling_key import tooling_key

        print(tooling_key())
        return 0
    if args.workspace is None or args.socket is None:
        parser.error("--workspace and --socket are required")
    if not args.workspace.is_dir():
        parser.error(f"--workspace {args.workspace} is not a directory")
    if args.listen and args.token_file is None:
        parser.error("--listen needs --token-file: a TCP listener always requires a token")
    check_args(args)
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
    setup_logging(args.log_level, args.log_format)
    if args.otel:
        try:
            setup_otel(SPANS, "airlockd")
        except ImportError as exc:
            return _refuse(str(exc))
    try:
        return _run(args, exec_user)
    except (privsep.StartupRefused, ContainmentError) as exc:
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
