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

from pydantic import ValidationError

from airlock.proxy.protocol import Allow, LeaseRule, Replacement

from .. import envvars
from ..leases import (
    git_basic_rule,
    github_api_rule,
    github_app_replacement,
    github_placeholder,
    vercel_placeholder,
)
from ..proxy import ProxyClient, ProxyError
from .connection import DEFAULT_PROXY_CONTROL


def _add_control(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--control",
        default=envvars.get(envvars.PROXY_CONTROL, DEFAULT_PROXY_CONTROL),
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


def _allows(args: argparse.Namespace) -> tuple[Allow | None, Allow | None]:
    """(HTTP allow, git allow) from the flags; ``--allow-json`` is the whole object."""
    if args.allow_json:
        whole = Allow.model_validate(json.loads(args.allow_json))
        return whole, whole
    http: dict[str, Any] = {}
    if args.method:
        http["methods"] = args.method
    if args.path:
        http["paths"] = args.path
    if args.graphql:
        http["graphql"] = {"operations": args.graphql.split(",")}
    git: dict[str, Any] = {}
    if args.git_repo:
        git = {"git": {"repos": args.git_repo, "allow_delete": bool(args.allow_delete)}}
        if args.push_ref:
            git["git"]["push_refs"] = args.push_ref
    elif args.push_ref or args.allow_delete:
        raise ValueError("--push-ref and --allow-delete need --git-repo")
    return (
        Allow.model_validate(http) if http else None,
        Allow.model_validate(git) if git else None,
    )


def _credential(args: argparse.Namespace) -> str | Replacement:
    if args.github_app_repo:
        permissions: dict[str, str] = {}
        for item in args.github_app_permission or []:
            name, sep, level = item.partition("=")
            if not sep:
                raise ValueError("--github-app-permission is NAME=read|write")
            permissions[name] = level
        return github_app_replacement(args.github_app_repo, permissions or None)
    return _read_token(args)


def _rules(args: argparse.Namespace, credential: str | Replacement) -> list[LeaseRule]:
    http_allow, git_allow = _allows(args)
    placeholder = args.placeholder or (
        github_placeholder() if args.github else vercel_placeholder()
    )
    rules: list[LeaseRule] = []
    if args.github:
        rules.append(github_api_rule(credential, placeholder, allow=http_allow))
        rules.append(
            git_basic_rule(credential, placeholder, username=args.username, allow=git_allow)
        )
    for host in args.host or []:
        replace = (
            credential.model_copy(update={"scheme": args.replace_scheme})
            if isinstance(credential, Replacement)
            else Replacement(scheme=args.replace_scheme, token=credential, username=args.username)
        )
        merged = http_allow
        if git_allow is not None:
            merged = (http_allow or Allow()).model_copy(update={"git": git_allow.git})
        rules.append(
            LeaseRule.model_validate(
                {
                    "host": host,
                    "header": args.header,
                    "placeholder": placeholder,
                    "schemes": args.schemes.split(","),
                    "replace": replace,
                    "allow": merged,
                }
            )
        )
    if not rules:
        raise ValueError("give --github and/or at least one --host")
    return rules


async def _lease_put(args: argparse.Namespace) -> int:
    try:
        rules = _rules(args, _credential(args))
    except ValidationError:
        # pydantic messages can quote input; never print them here.
        print("airlock: invalid lease rule (check --method/--path/--graphql/...)", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"airlock: {exc}", file=sys.stderr)
        return 2
    async with _client(args) as client:
        try:
            info = await client.put_lease(args.session_id, args.lease_id, rules, args.ttl)
        except ProxyError as exc:
            return _fail(exc)
    _print(info.model_dump(mode="json", exclude_none=True))
    print(f"# placeholder: {rules[0].placeholder}", file=sys.stderr)
    return 0


async def _session_events(args: argparse.Namespace) -> int:
    """Print events as JSON lines; ``--follow`` keeps long polling."""
    sid = None if args.all else args.session_id
    if sid is None and not args.all:
        print("airlock: give a session id or --all", file=sys.stderr)
        return 2
    async with _client(args) as client:
        try:
            if not args.follow:
                page = await client.events_page(sid, after=args.after)
                for event in page.events:
                    print(event.model_dump_json())
                print(f"# next: {page.next}", file=sys.stderr)
                return 0
            async for event in client.events(sid, after=args.after):
                print(event.model_dump_json(), flush=True)
        except ProxyError as exc:
            return _fail(exc)
    return 0  # pragma: no cover - --follow ends by a signal


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

    events = ssub.add_parser("events", help="a session's events (JSON lines)")
    _add_control(events)
    events.add_argument("session_id", nargs="?")
    events.add_argument("--all", action="store_true", help="every session's events")
    events.add_argument("--after", type=int, default=0, help="only events with seq > N")
    events.add_argument("--follow", action="store_true", help="keep printing new events")
    events.set_defaults(func=_session_events)

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
    put.add_argument(
        "--placeholder",
        help="default: a fresh one shaped like the credential (ghs_... for --github)",
    )
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
    prov = put.add_argument_group("proxy-minted GitHub App token (no token is read)")
    prov.add_argument("--github-app-repo", action="append", metavar="OWNER/NAME")
    prov.add_argument("--github-app-permission", action="append", metavar="NAME=LEVEL")
    scope = put.add_argument_group("allow: what the credential may do (default: anything)")
    scope.add_argument("--method", action="append", help="HTTP method (repeatable)")
    scope.add_argument("--path", action="append", help="path glob, e.g. /repos/o/r/** (repeatable)")
    scope.add_argument("--graphql", help="query or query,mutation")
    scope.add_argument("--git-repo", action="append", metavar="OWNER/NAME", help="git fetch/push")
    scope.add_argument("--push-ref", action="append", help="ref glob a push may update")
    scope.add_argument("--allow-delete", action="store_true", help="pushes may delete refs")
    scope.add_argument("--allow-json", help="the whole allow object as JSON")
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
