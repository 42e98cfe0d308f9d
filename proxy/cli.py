"""``airlock-proxy``: the credential-swapping egress proxy."""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from airlock.client import cli_common
from airlock.proxy.config import (
    ConfigError,
    ProxyConfig,
    parse_allow,
    parse_control,
    parse_intercept,
    parse_listen,
    parse_resolve,
)


def build_parser() -> argparse.ArgumentParser:
    p = cli_common.Parser(
        prog="airlock-proxy",
        description="Egress proxy that swaps placeholder tokens for real credentials "
        "on leased hosts only.",
    )
    cli_common.add_common_flags(p)
    p.add_argument("--listen", default="127.0.0.1:8080", help="proxy address HOST:PORT")
    p.add_argument(
        "--control",
        default=None,
        help="control API: unix:PATH (default <state-dir>/control.sock) or tcp://HOST:PORT",
    )
    p.add_argument("--control-token-file", type=Path, help="bearer token for the control API")
    p.add_argument(
        "--state-dir",
        type=Path,
        default=Path.home() / ".local" / "state" / "airlock-proxy",
        help="CA, trust bundle and default audit log live here",
    )
    p.add_argument("--store", default="memory", help="memory or redis://HOST:PORT/DB")
    p.add_argument(
        "--intercept",
        action="append",
        metavar="HOST",
        help="TLS-terminate HOST (repeatable; default github.com, api.github.com, "
        "vercel.com, api.vercel.com)",
    )
    p.add_argument(
        "--allow",
        action="append",
        metavar="HOST_PATTERN",
        help="operator allow pattern: HOST, *.DOMAIN or * (repeatable)",
    )
    p.add_argument(
        "--resolve",
        action="append",
        metavar="HOST:PORT:ADDR[:ADDR_PORT]",
        help="dial ADDR for HOST:PORT, like curl --resolve (repeatable)",
    )
    p.add_argument("--upstream-ca", type=Path, help="extra trust anchor for upstream TLS")
    p.add_argument(
        "--audit-log", type=Path, help="JSON-lines audit log (default <state-dir>/audit.log)"
    )
    p.add_argument("--advertise", help="HOST:PORT sandboxes use in their proxy URL")
    p.add_argument("--log-level", default="INFO", help="log level of airlock's own messages")
    return p


def config_from_args(args: argparse.Namespace) -> ProxyConfig:
    cwd = Path.cwd()
    state_dir: Path = args.state_dir if args.state_dir.is_absolute() else cwd / args.state_dir
    host, port = parse_listen(args.listen)
    control = parse_control(args.control or f"unix:{state_dir / 'control.sock'}", cwd)
    token: str | None = None
    if args.control_token_file is not None:
        try:
            token = args.control_token_file.read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise ConfigError(f"--control-token-file {args.control_token_file}: {reason}") from None
        if not token:
            raise ConfigError("--control-token-file is empty")
    if control.kind == "tcp" and token is None:
        raise ConfigError("--control tcp:// requires --control-token-file")
    if control.kind == "unix" and control.path is not None and len(str(control.path)) >= 104:
        raise ConfigError(f"--control: socket path too long ({len(str(control.path))} bytes)")
    resolve = dict(parse_resolve(v) for v in args.resolve or [])
    store = args.store
    if store != "memory" and not store.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError("--store: expected memory or redis://...")
    upstream_ca = args.upstream_ca
    if upstream_ca is not None and not upstream_ca.is_file():
        raise ConfigError(f"--upstream-ca: no such file {upstream_ca}")
    audit_log = args.audit_log
    if audit_log is not None and not audit_log.is_absolute():
        audit_log = cwd / audit_log
    return ProxyConfig(
        listen_host=host,
        listen_port=port,
        control=control,
        state_dir=state_dir,
        store_url=store,
        control_token=token,
        intercept=parse_intercept(args.intercept),
        allow=parse_allow(args.allow),
        resolve=resolve,
        upstream_ca=upstream_ca.resolve() if upstream_ca else None,
        audit_log=audit_log,
        advertise=args.advertise,
    )


def _setup_logging(level: str, log_format: str = "text") -> None:
    # mitmproxy's own messages can quote protocol errors; keep them to warnings.
    cli_common.setup_logging(
        level, log_format, logger="airlock", quiet={"mitmproxy": logging.WARNING}
    )


def _check_port_free(flag: str, host: str, port: int) -> None:
    """Refuse a taken port up front: one line naming the flag, not mitmproxy's log dump.

    (A race with another process binding in between still fails later, in mitmproxy.)
    """
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ConfigError(f"{flag} {host}:{port}: cannot resolve ({exc})") from None
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(addr)
        except OSError as exc:
            raise ConfigError(
                f"{flag} {host}:{port}: {(exc.strerror or str(exc)).lower()}"
            ) from None


def main(argv: Sequence[str] | None = None) -> int:
    return cli_common.run_guarded("airlock-proxy", lambda: _main(argv), ConfigError)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.log_level, args.log_format)
    try:
        config = config_from_args(args)
    except OSError as exc:
        return cli_common.fail("airlock-proxy", exc)
    _check_port_free("--listen", config.listen_host, config.listen_port)
    from airlock.proxy.app import ProxyServer
    from airlock.proxy.ca import CAError

    try:
        return asyncio.run(ProxyServer(config).run())
    except KeyboardInterrupt:
        return 130
    except CAError as exc:
        return cli_common.fail("airlock-proxy", exc)


if __name__ == "__main__":
    sys.exit(main())
