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
from airlock.client.tracing import setup_otel

from .config import (
    ConfigError,
    ProxyConfig,
    parse_allow,
    parse_control,
    parse_intercept,
    parse_listen,
    parse_resolve,
    read_control_token,
)

# The "limits" group: every option in it is one number with a default, so
# they are rows of one table rather than a dozen near-identical calls.
# (flag, type, default, help); the order is the order --help lists them in.
_LIMIT_OPTIONS: tuple[tuple[str, type[int] | type[float], float, str], ...] = (
    ("--max-head-bytes", int, 65536, "request head size limit (431 beyond)"),
    ("--head-timeout", float, 10.0, "seconds to send a request head"),
    (
        "--idle-timeout",
        float,
        300.0,
        "close a connection after this many seconds without a byte either way",
    ),
    (
        "--max-connections-per-session",
        int,
        128,
        "open connections one session may hold (429 beyond)",
    ),
    (
        "--session-rate",
        float,
        500.0,
        "requests per second per session, token bucket refill (429 beyond); 0 = no limit",
    ),
    ("--session-burst", int, 1000, "token bucket size per session"),
    (
        "--connection-rate",
        float,
        200.0,
        "requests, new HTTP/2 streams and stream resets per second on one connection "
        "(the proxy stops reading a connection over it); 0 = no limit",
    ),
    ("--connection-burst", int, 400, "token bucket size per connection"),
    (
        "--max-unauthenticated-connections",
        int,
        64,
        "connections that have not proven a session yet (beyond: closed at once)",
    ),
    (
        "--unauthenticated-timeout",
        float,
        5.0,
        "seconds a connection may take to prove a session before it is closed",
    ),
    (
        "--max-decoded-bytes",
        int,
        1 << 30,
        "a compressed response body is cut (decoded_too_large) once it decodes past "
        "this many bytes",
    ),
    (
        "--max-decode-ratio",
        int,
        100,
        "a compressed response body is cut (decoded_too_large) once it decodes to more "
        "than this many times its compressed size "
        "(sustained, after a 4 MiB allowance)",
    ),
    (
        "--refusal-audit-per-minute",
        int,
        60,
        "407/408/429/431 refusals audited per reason and minute (then counted)",
    ),
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
    p.add_argument(
        "--otel",
        action="store_true",
        help="export a span per control request over OTLP/HTTP; the endpoint comes from "
        "OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT (needs the otel extra)",
    )
    p.add_argument(
        "--store-key-file",
        type=Path,
        help="AES-256 key(s) sealing Redis values, base64, one a line, first seals "
        "(openssl rand -base64 32); every replica needs the same file",
    )
    p.add_argument(
        "--store-plaintext",
        action="store_true",
        help="run the Redis store without encryption at rest (a deliberate choice)",
    )
    scopes = p.add_argument_group("least privilege")
    scopes.add_argument(
        "--on-exfiltration",
        choices=("revoke", "refuse"),
        default="revoke",
        help="on a placeholder sent where its lease does not reach: revoke every lease of "
        "the session (default) or only refuse the request",
    )
    scopes.add_argument("--github-app-id", help="GitHub App id for provider-backed leases")
    scopes.add_argument(
        "--github-app-key-file", type=Path, help="the GitHub App's private key (PEM)"
    )
    scopes.add_argument(
        "--github-api-url",
        default="https://api.github.com",
        help="GitHub API base URL for minting (GHES: https://HOST/api/v3)",
    )
    limits = p.add_argument_group("limits")
    for flag, kind, default, text in _LIMIT_OPTIONS:
        limits.add_argument(flag, type=kind, default=default, help=text)
    return p


def _positive(name: str, value: float, *, zero_ok: bool = False) -> None:
    if value < 0 or (value == 0 and not zero_ok):
        raise ConfigError(f"{name}: must be {'>= 0' if zero_ok else '> 0'}, got {value}")


def config_from_args(args: argparse.Namespace) -> ProxyConfig:
    cwd = Path.cwd()
    state_dir: Path = args.state_dir if args.state_dir.is_absolute() else cwd / args.state_dir
    host, port = parse_listen(args.listen)
    control = parse_control(args.control or f"unix:{state_dir / 'control.sock'}", cwd)
    token: str | None = None
    token_file: Path | None = args.control_token_file
    if token_file is not None:
        if not token_file.is_absolute():
            token_file = cwd / token_file
        try:
            token = read_control_token(token_file)
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise ConfigError(f"--control-token-file {token_file}: {reason}") from None
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
    key_file: Path | None = args.store_key_file
    if key_file is not None and not key_file.is_absolute():
        key_file = cwd / key_file
    if store != "memory":
        if key_file is None and not args.store_plaintext:
            raise ConfigError(
                "--store redis:// needs --store-key-file (tokens are encrypted at rest; "
                "make a key with: openssl rand -base64 32) or, deliberately, --store-plaintext"
            )
        if key_file is not None and args.store_plaintext:
            raise ConfigError("--store-key-file and --store-plaintext exclude each other")
        if key_file is not None:
            from .store.crypto import KeyFileError, Sealer

            try:
                Sealer.from_file(key_file)
            except KeyFileError as exc:
                raise ConfigError(str(exc)) from None
    app_key: Path | None = args.github_app_key_file
    if (args.github_app_id is None) != (app_key is None):
        raise ConfigError("--github-app-id and --github-app-key-file go together")
    if app_key is not None:
        app_key = app_key if app_key.is_absolute() else cwd / app_key
        if not app_key.is_file():
            raise ConfigError(f"--github-app-key-file: no such file {app_key}")
        from airlock.client.providers.jwt import load_private_key

        try:
            load_private_key(app_key.read_bytes())
        except (ValueError, TypeError, OSError):
            raise ConfigError(
                f"--github-app-key-file {app_key}: not an unencrypted RSA private key (PEM); "
                "download the key from the GitHub App's settings"
            ) from None
    if not str(args.github_api_url).startswith("https://"):
        raise ConfigError("--github-api-url: expected https://...")
    _positive("--max-head-bytes", args.max_head_bytes)
    _positive("--head-timeout", args.head_timeout)
    _positive("--idle-timeout", args.idle_timeout)
    _positive("--max-connections-per-session", args.max_connections_per_session)
    _positive("--session-rate", args.session_rate, zero_ok=True)
    _positive("--session-burst", args.session_burst)
    _positive("--connection-rate", args.connection_rate, zero_ok=True)
    _positive("--connection-burst", args.connection_burst)
    _positive("--max-unauthenticated-connections", args.max_unauthenticated_connections)
    _positive("--unauthenticated-timeout", args.unauthenticated_timeout)
    _positive("--refusal-audit-per-minute", args.refusal_audit_per_minute, zero_ok=True)
    _positive("--max-decoded-bytes", args.max_decoded_bytes)
    _positive("--max-decode-ratio", args.max_decode_ratio)
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
        control_token_file=token_file,
        store_key_file=key_file,
        store_plaintext=bool(args.store_plaintext),
        max_head_bytes=args.max_head_bytes,
        head_timeout_s=args.head_timeout,
        idle_timeout_s=args.idle_timeout,
        max_session_connections=args.max_connections_per_session,
        session_rate=args.session_rate,
        session_burst=args.session_burst,
        refusal_audit_per_minute=args.refusal_audit_per_minute,
        on_exfiltration=args.on_exfiltration,
        github_app_id=args.github_app_id,
        github_app_key_file=app_key,
        github_api_url=str(args.github_api_url).rstrip("/"),
        connection_rate=args.connection_rate,
        connection_burst=args.connection_burst,
        max_unauthenticated_connections=args.max_unauthenticated_connections,
        unauthenticated_timeout_s=args.unauthenticated_timeout,
        max_decoded_bytes=args.max_decoded_bytes,
        max_decode_ratio=args.max_decode_ratio,
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
    from .tracing import SPANS

    if args.otel:
        try:
            setup_otel(SPANS, "airlock-proxy")
        except ImportError as exc:
            return cli_common.fail("airlock-proxy", exc)
    from .addons.chain import ChainError
    from .app import ProxyServer
    from .ca import CAError
    from .store.crypto import KeyFileError

    try:
        return asyncio.run(ProxyServer(config).run())
    except KeyboardInterrupt:
        return 130
    except (CAError, ChainError, KeyFileError) as exc:
        return cli_common.fail("airlock-proxy", exc)
    finally:
        SPANS.shutdown()  # --otel: the last spans leave before the process does


if __name__ == "__main__":
    sys.exit(main())
