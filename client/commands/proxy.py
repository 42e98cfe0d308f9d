"""``airlock session ...`` and ``airlock lease ...``: operator conveniences.

Real tokens are never taken from the command line (argv is visible to every
user through ``ps``): ``lease put`` reads one from ``--token-file``,
``--token-env`` or standard input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from airlock.client import envvars
from airlock.client.proxy import ProxyClient, ProxyError
from airlock.proxy.protocol import LeaseRule

DEFAULT_CONTROL = "unix:.airlock/proxy.sock"


def _add_control(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--control",
        default=envvars.get(envvars.PROXY_CONTROL, DEFAULT_CONTROL),
        help="control API: unix:PATH or tcp://HOST:PORT (env AIRLOCK_PROXY_CONTROL)",
    )
    p.add_argument(
        "--control-token-file",
        type=Path,
        help="bearer token for a TCP control API (env AIRLOCK_PROXY_CONTROL_TOKEN_FILE)",
    )


def _client(args: argparse.Namespace) -> ProxyClient:
    if args.control_token_file is not None:
        token: str | None = args.control_token_file.read_text().strip()
    else:
        token = envvars.secret(envvars.PROXY_CONTROL_TOKEN, envvars.PROXY_CONTROL_TOKEN_FILE)
    return ProxyClient(args.control, token=token)


def _print(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def _fail(exc: ProxyError) -> int:
    print(f"airlock: proxy error {exc.code} ({exc.status}): {exc.message}", file=sys.stderr)
    return 1


async def _session_create(args: argparse.Namespace) -> int:
    async with _client(args) as client:
        try:
            info = await client.create_session(
                allow=args.allow or [], ttl_s=args.ttl, session_id=args.session_id
            )
        except ProxyError as exc:
            return _fail(exc)
    _print(info.model_dump(mode="json"))
    print(
        f"# in the sandbox: export HTTPS_PROXY={info.proxy_url} HTTP_PROXY={info.proxy_url}",
        file=sys.stderr,
    )
    return 0


async def _session_delete(args: argparse.Namespace) -> int:
    async with _client(args) as client:
        try:
            await client.delete_session(args.session_id)
        except ProxyError as exc:
            return _fail(exc)
    return 0


def _read_token(args: argparse.Namespace) -> str:
    if args.token_file is not None:
        return Path(args.token_file).read_text().strip()
    if args.token_env is not None:
        value = os.environ.get(args.token_env, "")
        if not value:
            raise ValueError(f"environment variable {args.token_env} is empty")
        return value.strip()
    return sys.stdin.readline().strip()


def _rules(args: argparse.Namespace, token: str) -> list[LeaseRule]:
    rules: list[LeaseRule] = []
    if args.github:
        rules.append(
            LeaseRule.model_validate(
                {
                    "host": "api.github.com",
                    "placeholder": args.placeholder,
                    "schemes": ["token", "bearer"],
                    "replace": {"scheme": "bearer", "token": token},
                }
            )
        )
        rules.append(
            LeaseRule.model_validate(
                {
                    "host": "github.com",
                    "placeholder": args.placeholder,
                    "schemes": ["basic"],
                    "replace": {"scheme": "basic", "token": token, "username": args.username},
                }
            )
        )
    for host in args.host or []:
        rules.append(
            LeaseRule.model_validate(
                {
                    "host": host,
                    "header": args.header,
                    "placeholder": args.placeholder,
                    "schemes": args.schemes.split(","),
                    "replace": {
                        "scheme": args.replace_scheme,
                        "token": token,
                        "username": args.username,
                    },
                }
            )
        )
    if not rules:
        raise ValueError("give --github and/or at least one --host")
    return rules


async def _lease_put(args: argparse.Namespace) -> int:
    try:
        rules = _rules(args, _read_token(args))
    except (ValueError, OSError) as exc:
        # pydantic messages can quote input; print only the exception type for those.
        msg = str(exc) if not hasattr(exc, "errors") else "invalid lease rule"
        print(f"airlock: {msg}", file=sys.stderr)
        return 2
    async with _client(args) as client:
        try:
            info = await client.put_lease(args.session_id, args.lease_id, rules, args.ttl)
        except ProxyError as exc:
            return _fail(exc)
    _print(info.model_dump(mode="json"))
    return 0


async def _lease_delete(args: argparse.Namespace) -> int:
    async with _client(args) as client:
        try:
            await client.delete_lease(args.session_id, args.lease_id)
        except ProxyError as exc:
            return _fail(exc)
    return 0


async def _lease_list(args: argparse.Namespace) -> int:
    async with _client(args) as client:
        try:
            leases = await client.list_leases(args.session_id)
        except ProxyError as exc:
            return _fail(exc)
    _print([lease.model_dump(mode="json") for lease in leases])
    return 0


def register(subparsers: Any) -> None:
    session = subparsers.add_parser("session", help="airlock-proxy sessions")
    ssub = session.add_subparsers(dest="session_command", required=True, metavar="ACTION")

    create = ssub.add_parser("create", help="create a session; prints its proxy URL")
    _add_control(create)
    create.add_argument("--allow", action="append", metavar="HOST_PATTERN")
    create.add_argument("--ttl", type=int, default=3600, help="seconds")
    create.add_argument("--id", dest="session_id", default=None)
    create.set_defaults(func=_session_create)

    delete = ssub.add_parser("delete", help="delete a session and its leases")
    _add_control(delete)
    delete.add_argument("session_id")
    delete.set_defaults(func=_session_delete)

    lease = subparsers.add_parser("lease", help="airlock-proxy credential leases")
    lsub = lease.add_subparsers(dest="lease_command", required=True, metavar="ACTION")

    put = lsub.add_parser("put", help="install or replace a lease (token from file/env/stdin)")
    _add_control(put)
    put.add_argument("session_id")
    put.add_argument("lease_id")
    put.add_argument("--placeholder", required=True)
    put.add_argument("--ttl", type=int, default=600, help="seconds")
    put.add_argument(
        "--github",
        action="store_true",
        help="api.github.com token|bearer -> Bearer, github.com Basic -> Basic",
    )
    put.add_argument("--host", action="append", help="leased host (repeatable)")
    put.add_argument("--header", default="authorization")
    put.add_argument("--schemes", default="token,bearer", help="comma list of token,bearer,basic")
    put.add_argument("--replace-scheme", default="bearer", choices=["bearer", "token", "basic"])
    put.add_argument("--username", default="x-access-token", help="user of Basic replacements")
    put.add_argument("--token-file", help="read the real token from this file")
    put.add_argument("--token-env", help="read the real token from this environment variable")
    put.set_defaults(func=_lease_put)

    ldel = lsub.add_parser("delete", help="remove a lease (idempotent)")
    _add_control(ldel)
    ldel.add_argument("session_id")
    ldel.add_argument("lease_id")
    ldel.set_defaults(func=_lease_delete)

    llist = lsub.add_parser("list", help="list a session's leases (metadata only)")
    _add_control(llist)
    llist.add_argument("session_id")
    llist.set_defaults(func=_lease_list)
