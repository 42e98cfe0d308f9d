"""``airlock exec``, ``ps``, ``logs`` and ``kill``: live commands and background processes, from a shell.

For an operator debugging a sandbox: ``airlock exec -- pytest -x`` shows the
output as it happens and exits with the command's code (128+N when a signal N
ended it, 124 on timeout, as ``timeout(1)`` does); ``airlock ps`` lists the
agent's background processes, ``airlock logs ID -f`` follows one, ``airlock
kill ID`` stops it.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO

from airlock.daemon.protocol import ExecExitEvent, ExecInput, ExecOutputEvent

from ..daemon import AirlockError
from .connection import connect, daemon_command, print_json

TIMEOUT_EXIT = 124


def _write(stream: TextIO, text: str) -> None:
    stream.write(text)
    stream.flush()


def _env(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"-e {pair!r}: give NAME=VALUE")
        env[name] = value
    return env


async def _exec(args: argparse.Namespace) -> int:
    argv = list(args.argv[1:] if args.argv[:1] == ["--"] else args.argv)
    if not argv:
        print(
            "airlock exec: give the command after --, e.g. airlock exec -- ls -la", file=sys.stderr
        )
        return 2
    try:
        req = ExecInput(argv=argv, cwd=args.cwd, env=_env(args.env), timeout_s=args.timeout)
    except ValueError as exc:
        print(f"airlock exec: {exc}", file=sys.stderr)
        return 2
    code = 0
    async with connect(args) as client:
        try:
            async for event in client.exec_stream(req):
                if isinstance(event, ExecOutputEvent):
                    _write(sys.stdout if event.type == "stdout" else sys.stderr, event.data)
                elif isinstance(event, ExecExitEvent):
                    code = _exit_status(event)
        except AirlockError as exc:
            print(f"airlock exec: {exc.code}: {exc.message}", file=sys.stderr)
            return 1
    return code


def _exit_status(event: ExecExitEvent) -> int:
    if event.timed_out:
        print("airlock exec: the command timed out and was killed", file=sys.stderr)
        return TIMEOUT_EXIT
    if event.exit_code is not None:
        return event.exit_code
    return 128 + (event.signal or 0)


async def _ps(args: argparse.Namespace) -> int:
    async with connect(args) as client:
        try:
            listing = await client.process_list()
        except AirlockError as exc:
            print(f"airlock ps: {exc.code}: {exc.message}", file=sys.stderr)
            return 1
    if args.json:
        print_json(listing.model_dump(mode="json"))
        return 0
    print(f"{'ID':<6} {'PID':>7} {'STATE':<12} {'STARTED':<8} {'NAME':<16} COMMAND")
    for p in listing.processes:
        if p.running:
            state = "running"
        elif p.exit_code is not None:
            state = f"exit {p.exit_code}"
        else:
            state = f"signal {p.signal}"
        started = time.strftime("%H:%M:%S", time.localtime(p.started_at))
        print(
            f"{p.id:<6} {p.pid:>7} {state:<12} {started:<8} {p.name or '-':<16} {' '.join(p.argv)}"
        )
    return 0


async def _logs(args: argparse.Namespace) -> int:
    offset = args.offset
    async with connect(args) as client:
        try:
            while True:
                part = await client.process_read(
                    id=args.id,
                    offset=offset,
                    max_bytes=1024 * 1024,
                    wait_ms=30000 if args.follow else 0,
                )
                if part.dropped:
                    print(f"[airlock: {part.dropped} bytes dropped]", file=sys.stderr)
                _write(sys.stdout, part.stdout)
                _write(sys.stderr, part.stderr)
                moved = part.next_offset != offset
                offset = part.next_offset
                if moved:
                    continue
                if not args.follow or not part.running:
                    return 0
        except AirlockError as exc:
            print(f"airlock logs: {exc.code}: {exc.message}", file=sys.stderr)
            return 1


async def _kill(args: argparse.Namespace) -> int:
    async with connect(args) as client:
        try:
            result = await client.process_kill(id=args.id, signal=args.signal)
        except AirlockError as exc:
            print(f"airlock kill: {exc.code}: {exc.message}", file=sys.stderr)
            return 1
    state = "still running (try --signal KILL)" if result.running else "stopped"
    print(f"{result.id} (pid {result.pid}): sent {result.signal}, {state}")
    return 0 if not result.running else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = daemon_command(
        sub, "exec", "run a command in the sandbox, printing its output live", _exec
    )
    run.add_argument("--cwd", default=".", help="working directory (default: the workspace)")
    run.add_argument("--timeout", type=int, default=3600, help="seconds before it is killed")
    run.add_argument("-e", "--env", action="append", default=[], help="NAME=VALUE, repeatable")
    run.add_argument("argv", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")

    ps = daemon_command(sub, "ps", "list the sandbox's background processes", _ps)
    ps.add_argument("--json", action="store_true", help="print the listing as JSON")

    logs = daemon_command(sub, "logs", "print a background process's output", _logs)
    logs.add_argument("id", help="process id from airlock ps, e.g. p1")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing until it exits")
    logs.add_argument("--offset", type=int, default=0, help="start at this output offset")

    kill = daemon_command(sub, "kill", "stop a background process and everything it started", _kill)
    kill.add_argument("id", help="process id from airlock ps, e.g. p1")
    kill.add_argument("--signal", choices=["TERM", "INT", "KILL"], default="TERM")
