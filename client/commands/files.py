"""``airlock cp`` and ``airlock watch``: files in and out of the sandbox, and their changes.

``airlock cp SRC DEST`` copies one way; exactly one side is ``sandbox:PATH``
(a path as the tools take it). A local directory is sent as a tree; a sandbox
directory comes back as a tree (``DEST`` is then a local directory). ``airlock
watch PATH...`` prints one line per change (``--json`` for the raw events)
until interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import stat
import sys
from pathlib import Path

from ..daemon import AirlockError
from ..errors import IsDirectory
from .connection import connect, daemon_command

PREFIX = "sandbox:"


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def _side(text: str) -> tuple[bool, str]:
    """(is it the sandbox side, the path)."""
    if text.startswith(PREFIX):
        return True, text[len(PREFIX) :] or "."
    return False, text


async def _cp(args: argparse.Namespace) -> int:
    src_remote, src = _side(args.src)
    dst_remote, dst = _side(args.dest)
    if src_remote == dst_remote:
        print(
            "airlock cp: exactly one side must be sandbox:PATH, e.g. airlock cp ./a.txt "
            "sandbox:a.txt or airlock cp sandbox:out ./out",
            file=sys.stderr,
        )
        return 2
    async with connect(args) as client:
        try:
            if dst_remote:
                local = Path(src)
                st = await asyncio.to_thread(_stat, local)
                if st is None:
                    print(f"airlock cp: {src}: no such file or directory", file=sys.stderr)
                    return 1
                if stat.S_ISDIR(st.st_mode):
                    tree = await client.upload_tree(local, dst)
                    print(f"{src} -> sandbox:{tree.path} ({tree.files} files, {tree.bytes} bytes)")
                else:
                    mode = st.st_mode & 0o777 if args.preserve_mode else None
                    done = await client.upload(local, dst, mode=mode)
                    print(
                        f"{src} -> sandbox:{done.path} ({done.bytes} bytes, sha256 {done.sha256})"
                    )
            else:
                local = Path(dst)
                is_dir = await asyncio.to_thread(local.is_dir)
                target = local / Path(src).name if is_dir else local
                try:
                    done = await client.download(src, target)
                    print(f"sandbox:{src} -> {target} ({done.bytes} bytes, sha256 {done.sha256})")
                except IsDirectory:
                    await client.download_tree(src, local)
                    print(f"sandbox:{src} -> {local}/")
        except AirlockError as exc:
            print(f"airlock cp: {exc.code}: {exc.message}", file=sys.stderr)
            return 1
    return 0


async def _watch(args: argparse.Namespace) -> int:
    async with connect(args) as client:
        try:
            async with client.watch(
                args.paths or ["."],
                recursive=not args.no_recursive,
                include=args.include,
                exclude=args.exclude,
                ignore_files=not args.no_ignore,
            ) as events:
                print(f"airlock watch: watching {' '.join(args.paths or ['.'])}", file=sys.stderr)
                sys.stderr.flush()
                async for event in events:
                    if args.json:
                        line = json.dumps(event.model_dump(mode="json", exclude_none=True))
                    elif event.type == "overflow":
                        line = "overflow (events were lost; rescan what you need)"
                    else:
                        slash = "/" if event.is_dir else ""
                        to = f" -> {event.to}{slash}" if event.to else ""
                        line = f"{event.type:<8} {event.path}{slash}{to}"
                    sys.stdout.write(line + "\n")
                    sys.stdout.flush()
        except AirlockError as exc:
            print(f"airlock watch: {exc.code}: {exc.message}", file=sys.stderr)
            return 1
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cp = daemon_command(sub, "cp", "copy a file or directory into or out of the sandbox", _cp)
    cp.add_argument("src", help="local path, or sandbox:PATH")
    cp.add_argument("dest", help="local path, or sandbox:PATH")
    cp.add_argument(
        "-p", "--preserve-mode", action="store_true", help="give a new sandbox file the local mode"
    )

    watch = daemon_command(sub, "watch", "print file changes in the sandbox as they happen", _watch)
    watch.add_argument("paths", nargs="*", help="directories to watch (default: the workspace)")
    watch.add_argument("--include", action="append", default=[], help="glob to report, repeatable")
    watch.add_argument("--exclude", action="append", default=[], help="glob to skip, repeatable")
    watch.add_argument("--no-ignore", action="store_true", help="report ignored paths too")
    watch.add_argument("--no-recursive", action="store_true", help="only the directories given")
    watch.add_argument("--json", action="store_true", help="print the raw events as JSON")
