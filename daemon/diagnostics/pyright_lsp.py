"""basedpyright kept running as a language server: ~0.3 s per check instead of ~2 s.

The CLI re-reads typeshed and the project on every run. One
``basedpyright-langserver --stdio`` per project root keeps that state; a check
opens the files (their bytes on disk), pulls their diagnostics
(``textDocument/diagnostic``, answered once the document is checked), and
closes them again, so the server
reads every file from disk the next time. Files changed behind the daemon's
back (``exec``, an editor) are found by comparing modification times before
each check and reported with ``workspace/didChangeWatchedFiles``; a project
too large to scan cheaply, or a server that misbehaves, falls back to the CLI
(:class:`LspUnavailable`). Servers are restarted after a while so that
changes outside the project (a ``pip install``) are picked up.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import stat
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..procs.group import kill_group
from ..protocol import Severity
from ..search.walk import SkipRules, WalkStats, walk
from .model import MAX_FINDINGS_PER_FILE, Finding, finding
from .procs import (
    READ_SCOPE,
    CheckTimeout,
    CheckUnavailable,
    RunAs,
    Spawned,
    spawn,
)

CHECK = "types"
NO_RULE = "basedpyright"
MAX_SCANNED_FILES = 20_000
MAX_SCANNED_ENTRIES = 200_000
MAX_AGE_S = 900.0
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "dist", "build"})
_SKIP = SkipRules(dirs=_SKIP_DIRS, hidden_dirs=True, venvs=True)
_SEVERITY: dict[int, Severity] = {1: "error", 2: "warning", 3: "info"}


class LspUnavailable(Exception):
    """The language server cannot serve this project; the caller uses the CLI instead."""


def _langserver_argv(cli: list[str]) -> list[str] | None:
    """``basedpyright-langserver`` beside the ``basedpyright`` the CLI path found."""
    head = Path(cli[0])
    candidate = head.with_name(head.name + "-langserver")
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return [str(candidate), "--stdio"]
    return None


def scan(root: Path) -> dict[str, int] | None:
    """mtime_ns of every .py/.pyi under ``root`` (hidden, venv and vendored dirs skipped).

    None when the tree is too large to scan before every check (too many Python
    files, or too many entries: a root without project markers can be ``/tmp``).
    """
    seen: dict[str, int] = {}
    stats = WalkStats()
    top = str(root)
    for entry in walk(
        root,
        "",
        max_depth=None,
        include_hidden=True,
        ignore=None,
        stats=stats,
        with_other=True,
        skip=_SKIP,
    ):
        if stats.listed > MAX_SCANNED_ENTRIES:
            return None
        if entry.kind == "dir" or not entry.rel.endswith((".py", ".pyi")):
            continue
        path = os.path.join(top, entry.rel)
        with contextlib.suppress(OSError):
            st = os.stat(path)  # a link to a file counts as that file, as before
            if not stat.S_ISDIR(st.st_mode):
                seen[path] = st.st_mtime_ns
        if len(seen) > MAX_SCANNED_FILES:
            return None
    if stats.listed > MAX_SCANNED_ENTRIES:
        return None
    return seen


def _uri(path: Path) -> str:
    return path.as_uri()


@dataclass
class _Server:
    proc: Spawned
    started: float
    pending: dict[int, asyncio.Future[Any]] = field(default_factory=dict)
    snapshot: dict[str, int] = field(default_factory=dict)
    reader: asyncio.Task[None] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ready: bool = False

    @property
    def alive(self) -> bool:
        return self.proc.running and self.reader is not None and not self.reader.done()


class PyrightServers:
    """One language server per project root, owned by the diagnostics service."""

    def __init__(self, *, start_after: int = 2, wait_for_start: bool = False) -> None:
        self.start_after = start_after
        """Checks of a root answered by the CLI before a server is started for it."""
        self.wait_for_start = wait_for_start
        """True: the check that starts a server waits for it (tests); else the CLI answers."""
        self._checks: dict[Path, int] = {}
        self._starting: dict[Path, asyncio.Task[None]] = {}
        self._failed: dict[Path, float] = {}
        self._servers: dict[Path, _Server] = {}
        self._ids = itertools.count(1)
        self._versions = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.run_as: RunAs = READ_SCOPE
        """Who the servers run as (write scope only: the service's exec user)."""
        self._live: set[int] = set()
        weakref.finalize(self, _kill_all, self._live)

    async def check(
        self,
        cli: list[str],
        root: Path,
        python: Path | None,
        files: dict[Path, str],
        errors_only: bool,
        timeout_s: float,
        run_as: RunAs = READ_SCOPE,
    ) -> list[Finding]:
        """Type findings for ``files``; raises LspUnavailable or CheckTimeout."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._drop_all()
            self._loop = loop
        self.run_as = run_as
        self._checks[root] = self._checks.get(root, 0) + 1
        server = self._servers.get(root)
        if server is not None and (
            not server.alive or time.monotonic() - server.started > MAX_AGE_S
        ):
            self._drop(root)
            server = None
        deadline = loop.time() + timeout_s
        if server is None or not server.ready:
            server = await self._server_for(cli, root, python, timeout_s)
        async with server.lock:
            remaining = deadline - loop.time()
            try:
                published = await asyncio.wait_for(self._check(server, root, files), remaining)
            except TimeoutError:
                self._drop(root)
                raise CheckTimeout(f"basedpyright did not finish within {timeout_s:g}s") from None
            except (ConnectionError, BrokenPipeError, LspUnavailable) as exc:
                self._drop(root)
                self._failed[root] = time.monotonic()  # the CLI serves this root for a while
                raise LspUnavailable(str(exc)) from exc
        return _findings(published, files, errors_only)

    async def _server_for(
        self, cli: list[str], root: Path, python: Path | None, timeout_s: float
    ) -> _Server:
        """A ready server, or LspUnavailable (the caller uses the CLI meanwhile).

        A server costs ~2.5 s of CPU to start, more than one CLI run: it is
        started only for a root checked more than ``start_after`` times (being
        edited, not a one-off), in the background, and used once it is ready.
        """
        if self._checks.get(root, 0) <= self.start_after:
            raise LspUnavailable("not checked often enough to keep a server")
        failed_at = self._failed.get(root)
        if failed_at is not None and time.monotonic() - failed_at < MAX_AGE_S:
            raise LspUnavailable("the language server failed recently")
        if self.wait_for_start:
            return await self._start(cli, root, python, timeout_s)
        if root not in self._starting:
            self._starting[root] = asyncio.create_task(
                self._start_in_background(cli, root, python, timeout_s)
            )
        raise LspUnavailable("the language server is starting")

    async def _start_in_background(
        self, cli: list[str], root: Path, python: Path | None, timeout_s: float
    ) -> None:
        try:
            await self._start(cli, root, python, timeout_s)
        except LspUnavailable:
            self._failed[root] = time.monotonic()
        finally:
            self._starting.pop(root, None)

    async def _check(
        self, server: _Server, root: Path, files: dict[Path, str]
    ) -> dict[Path, tuple[str, list[dict[str, Any]]]]:
        current = await asyncio.to_thread(scan, root)
        if current is None:
            raise LspUnavailable(f"{root} has too many Python files to track")
        changes = _changes(server.snapshot, current)
        server.snapshot = current
        if changes:
            self._notify(server, "workspace/didChangeWatchedFiles", {"changes": changes})
        texts = await asyncio.to_thread(_read_all, list(files))
        opened = [real for real, text in texts.items() if text is not None]
        for real in opened:
            self._notify(
                server,
                "textDocument/didOpen",
                {
                    "textDocument": {
                        "uri": _uri(real),
                        "languageId": "python",
                        "version": next(self._versions),
                        "text": texts[real],
                    }
                },
            )
        try:
            published: dict[Path, tuple[str, list[dict[str, Any]]]] = {}
            for real in opened:
                # Pull diagnostics: the answer comes after this document is checked.
                report = await self._request(
                    server, "textDocument/diagnostic", {"textDocument": {"uri": _uri(real)}}
                )
                items = report.get("items", []) if isinstance(report, dict) else []
                published[real] = (texts[real] or "", list(items))
        finally:
            for real in opened:
                with contextlib.suppress(ConnectionError):
                    self._notify(
                        server, "textDocument/didClose", {"textDocument": {"uri": _uri(real)}}
                    )
        return published

    # ------------------------------------------------------------ process

    async def _start(
        self, cli: list[str], root: Path, python: Path | None, timeout_s: float
    ) -> _Server:
        argv = _langserver_argv(cli)
        if argv is None:
            raise LspUnavailable("basedpyright-langserver is not installed")
        try:
            spawned = await spawn(argv, cwd=root, env=self.run_as.env(), run_as=self.run_as)
        except CheckUnavailable as exc:
            raise LspUnavailable(str(exc)) from exc
        server = _Server(proc=spawned, started=time.monotonic())
        self._live.add(spawned.pid)
        server.reader = asyncio.create_task(self._read(server, python))
        self._servers[root] = server
        try:
            await asyncio.wait_for(
                self._request(
                    server,
                    "initialize",
                    {
                        "processId": os.getpid(),
                        "rootUri": _uri(root),
                        "workspaceFolders": [{"uri": _uri(root), "name": root.name or "root"}],
                        "capabilities": {
                            "textDocument": {"diagnostic": {"dynamicRegistration": False}},
                            "workspace": {"configuration": True},
                        },
                    },
                ),
                timeout_s,
            )
            self._notify(server, "initialized", {})
            scanned = await asyncio.to_thread(scan, root)
            server.snapshot = scanned or {}
            server.ready = True
        except (TimeoutError, ConnectionError, BrokenPipeError, LspUnavailable) as exc:
            self._drop(root)
            raise LspUnavailable(f"basedpyright-langserver did not start: {exc!r}") from exc
        return server

    def _send(self, server: _Server, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        server.proc.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def _notify(self, server: _Server, method: str, params: dict[str, Any]) -> None:
        self._send(server, {"method": method, "params": params})

    async def _request(self, server: _Server, method: str, params: dict[str, Any]) -> Any:
        ident = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        server.pending[ident] = future
        self._send(server, {"id": ident, "method": method, "params": params})
        return await future

    async def _read(self, server: _Server, python: Path | None) -> None:
        stdout = server.proc.stdout
        try:
            while True:
                length = -1
                while True:
                    line = await stdout.readline()
                    if not line:
                        return
                    line = line.strip()
                    if not line:
                        break
                    name, _, value = line.decode("ascii", "replace").partition(":")
                    if name.lower() == "content-length":
                        length = int(value.strip())
                if length < 0:
                    continue
                message = json.loads(await stdout.readexactly(length))
                self._dispatch(server, message, python)
        except (ValueError, asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self._live.discard(server.proc.pid)
            gone = LspUnavailable("basedpyright-langserver exited")
            for future in server.pending.values():
                if not future.done():
                    future.set_exception(gone)
            # Also on cancellation (the loop shutting down): the server must not outlive it.
            await server.proc.reap()

    def _dispatch(self, server: _Server, message: dict[str, Any], python: Path | None) -> None:
        method = message.get("method")
        if method is not None and "id" in message:  # a request from the server
            result: Any = None
            if method == "workspace/configuration":
                items = message.get("params", {}).get("items", [])
                result = [
                    {"pythonPath": str(python)}
                    if python is not None and item.get("section") == "python"
                    else None
                    for item in items
                ]
            with contextlib.suppress(ConnectionError):
                self._send(server, {"id": message["id"], "result": result})
        elif method is None and "id" in message:
            reply = server.pending.pop(int(message["id"]), None)
            if reply is not None and not reply.done():
                if "error" in message:
                    reply.set_exception(LspUnavailable(str(message["error"])[:300]))
                else:
                    reply.set_result(message.get("result"))

    def _drop(self, root: Path) -> None:
        server = self._servers.pop(root, None)
        if server is not None:
            server.proc.kill()
            self._live.discard(server.proc.pid)

    def _drop_all(self) -> None:
        for task in self._starting.values():
            task.cancel()
        self._starting.clear()
        for root in list(self._servers):
            self._drop(root)

    def ready_roots(self) -> list[Path]:
        """Roots with a running, initialised server (tests and the benchmark look)."""
        return [root for root, server in self._servers.items() if server.ready and server.alive]

    async def aclose(self) -> None:
        servers = list(self._servers.values())
        self._drop_all()
        if self._loop is not asyncio.get_running_loop():
            return
        for server in servers:
            if server.reader is not None:
                with contextlib.suppress(BaseException):
                    await server.reader  # it reaps the process


def _kill_all(pids: set[int]) -> None:
    for pid in list(pids):
        kill_group(pid)
    pids.clear()


def clean_message(message: str) -> str:
    """pyright indents continuation lines with no-break spaces, sometimes: plain spaces."""
    message = message.replace("\xa0", " ")
    return "\n".join(part.rstrip() for part in message.split("\n")).strip()


def _changes(before: dict[str, int], after: dict[str, int]) -> list[dict[str, Any]]:
    """LSP FileChangeType: 1 created, 2 changed, 3 deleted."""
    out: list[dict[str, Any]] = []
    for path, mtime in after.items():
        old = before.get(path)
        if old is None:
            out.append({"uri": Path(path).as_uri(), "type": 1})
        elif old != mtime:
            out.append({"uri": Path(path).as_uri(), "type": 2})
    out.extend({"uri": Path(p).as_uri(), "type": 3} for p in before.keys() - after.keys())
    return out


def _read_all(paths: list[Path]) -> dict[Path, str | None]:
    texts: dict[Path, str | None] = {}
    for path in paths:
        try:
            texts[path] = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            texts[path] = None
    return texts


def _findings(
    published: dict[Path, tuple[str, list[dict[str, Any]]]],
    files: dict[Path, str],
    errors_only: bool,
) -> list[Finding]:
    out: list[Finding] = []
    for real, (text, diagnostics) in published.items():
        lines = text.split("\n")
        for item in diagnostics[:MAX_FINDINGS_PER_FILE]:
            severity = _SEVERITY.get(int(item.get("severity", 1)))
            if severity is None or (errors_only and severity != "error"):
                continue  # hints (unused, unreachable) are editor decorations
            start = item.get("range", {}).get("start", {})
            line = int(start.get("line", 0))
            out.append(
                finding(
                    path=files[real],
                    line=line + 1,
                    column=int(start.get("character", 0)) + 1,
                    severity=severity,
                    check=CHECK,
                    code=str(item.get("code") or NO_RULE),
                    message=clean_message(str(item.get("message", ""))),
                    anchor=lines[line] if 0 <= line < len(lines) else "",
                )
            )
    return out
