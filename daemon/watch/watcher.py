"""One watch stream: inotify watches on confined directories, events coalesced into lines.

Every watched directory is opened through the resolver (the target) or below
its descriptor without following links (the shared walker, for the
subdirectories), and watched through that descriptor: a symlink pointing out
of the workspace is never entered, so nothing outside is ever reported. Each
watch remembers its directory's path below the target, its ignore rules, and
its display prefix; a directory moved inside the tree carries its watches
along (their paths are rewritten), one moved out loses them.

Events are gathered for 50 ms after the first one and coalesced per path
(created then modified is ``created``; created then deleted is nothing;
deleted then created is ``modified``; ``moved`` pairs ``IN_MOVED_FROM`` with
its ``IN_MOVED_TO``, and an unpaired half is ``deleted``/``created``). A burst of
more than :data:`MAX_PENDING` events in one window, a kernel queue overflow,
or a client that does not read gives one ``overflow`` event; the events of the
flood are dropped and the stream goes on with the first calm window.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..context import ToolContext
from ..errors import InvalidRequest, NotFound, TooLarge
from ..paths import ResolvedPath
from ..search.globs import compile_glob
from ..search.ignore import IgnoreStack, open_below, stack_for
from ..search.walk import walk
from . import inotify

COALESCE_S = 0.05
MAX_PENDING = 8192  # events in one window, or lines waiting for a slow client
MAX_WATCHES = 50_000
_READ_BYTES = 256 * 1024


class GlobSet:
    """Globs as the search tools read them: no '/' matches the name at any depth."""

    def __init__(self, globs: list[str]) -> None:
        self.names = [compile_glob(g, braces=True) for g in globs if "/" not in g.rstrip("/")]
        self.paths = [
            compile_glob(g.strip("/"), braces=True) for g in globs if "/" in g.rstrip("/")
        ]

    def __bool__(self) -> bool:
        return bool(self.names or self.paths)

    def matches(self, path: str) -> bool:
        name = path.rsplit("/", 1)[-1]
        return any(p.match(name) for p in self.names) or any(p.match(path) for p in self.paths)


@dataclass
class _Dir:
    target: int  # index into Watcher.targets
    rel: str  # below the target ("" for the target itself)
    ignore: IgnoreStack | None


@dataclass
class _Target:
    resolved: ResolvedPath
    fd: int


class Watcher:
    def __init__(
        self,
        ctx: ToolContext,
        resolved: list[ResolvedPath],
        *,
        recursive: bool,
        include: list[str],
        exclude: list[str],
        ignore_files: bool,
        on_lines: Callable[[list[dict[str, Any]]], None],
    ) -> None:
        self.ctx = ctx
        self.recursive = recursive
        self.include = GlobSet(include)
        self.exclude = GlobSet(exclude)
        self.ignore_files = ignore_files
        self.on_lines = on_lines
        self.fd = inotify.init()
        self.targets: list[_Target] = []
        self.dirs: dict[int, _Dir] = {}
        self._pending: dict[tuple[str, str | None], str] = {}  # (path, to) -> type, in order
        self._is_dir: dict[str, bool] = {}
        self._moves: dict[int, tuple[int, str, bool]] = {}  # cookie -> (wd, name, is_dir)
        self._window = 0
        self._flooded = False
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        try:
            for item in resolved:
                self._add_target(item)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ set-up

    def _add_target(self, resolved: ResolvedPath) -> None:
        with self.ctx.roots.parent(resolved) as anchor:
            st = anchor.lstat() if anchor.name != "." else os.fstat(anchor.dir_fd)
        if st is None:
            raise NotFound(f"{resolved.display} does not exist", {"path": resolved.display})
        if not stat.S_ISDIR(st.st_mode):
            raise InvalidRequest(
                f"{resolved.display} is not a directory; watch the directory that holds it "
                "(use include to narrow the events)",
                {"path": resolved.display},
            )
        with self.ctx.roots.directory(resolved) as fd:
            held = os.dup(fd)
        index = len(self.targets)
        self.targets.append(_Target(resolved, held))
        ignore = None
        if self.ignore_files:
            ignore = stack_for(resolved.real, "", held)
        self._watch_tree(index, "", ignore, announce=False)

    def _watch_tree(
        self, index: int, rel: str, ignore: IgnoreStack | None, *, announce: bool
    ) -> None:
        """Watch ``rel`` (below target ``index``) and, when recursive, every directory in it.

        ``announce`` reports what is already inside (a directory that appeared
        with contents, or moved in): created events for each entry.
        """
        target = self.targets[index]
        try:
            fd = open_below(target.fd, rel)
        except OSError:
            return  # gone already, or replaced by a symlink: nothing to watch
        try:
            self._add(index, rel, fd, ignore)
            if not self.recursive and not announce:
                return
            stacks: dict[str, IgnoreStack | None] = {rel: ignore}
            for entry in walk(
                Path("."),  # unused: the walk starts from fd
                rel,  # so entries (and the ignore rules) are relative to the target
                max_depth=None if self.recursive else 1,
                include_hidden=True,
                ignore=ignore,
                start_fd=fd,
                prune_dir=self._excluded_dir(index),
            ):
                child = entry.rel
                is_dir = entry.kind == "dir"
                if announce:
                    self._note(index, child, "created", is_dir)
                if is_dir and self.recursive:
                    try:
                        sub = open_below(target.fd, child)
                    except OSError:
                        continue
                    try:
                        inner = stacks.get(child.rpartition("/")[0], ignore)
                        if inner is not None:
                            inner = inner.enter(sub, child)
                        stacks[child] = inner
                        self._add(index, child, sub, inner)
                    finally:
                        os.close(sub)
        finally:
            os.close(fd)

    def _excluded_dir(self, index: int) -> Callable[[str], bool] | None:
        if not self.exclude:
            return None
        return lambda rel: self.exclude.matches(self._display(index, rel))

    def _add(self, index: int, rel: str, fd: int, ignore: IgnoreStack | None) -> None:
        if len(self.dirs) >= MAX_WATCHES:
            raise TooLarge(
                f"watching more than {MAX_WATCHES} directories; watch a smaller part of the tree "
                "or exclude generated directories",
                {"limit": MAX_WATCHES},
            )
        try:
            wd = inotify.add_watch_fd(self.fd, fd)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise TooLarge(
                    "the kernel's inotify watch limit is reached (fs.inotify.max_user_watches); "
                    "watch a smaller tree or raise the limit",
                ) from None
            raise
        self.dirs[wd] = _Dir(index, rel, ignore)

    # ------------------------------------------------------------ running

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        loop.add_reader(self.fd, self._readable)

    def close(self) -> None:
        """Remove every watch (closing the inotify descriptor does) and the held fds."""
        if self._loop is not None and self.fd >= 0:
            self._loop.remove_reader(self.fd)
        if self._timer is not None:
            self._timer.cancel()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        for target in self.targets:
            with contextlib.suppress(OSError):
                os.close(target.fd)
        self.targets.clear()
        self.dirs.clear()

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, _READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        for event in inotify.parse(data):
            self._handle(event)
        if (self._pending or self._moves or self._flooded) and self._timer is None:
            assert self._loop is not None
            self._timer = self._loop.call_later(COALESCE_S, self._flush)

    def _display(self, index: int, rel: str) -> str:
        resolved = self.targets[index].resolved
        return self.ctx.roots.display(resolved.real / rel) if rel else resolved.display

    def _handle(self, event: inotify.RawEvent) -> None:
        self._window += 1
        if event.mask & inotify.IN_Q_OVERFLOW:
            self._overflow()
            return
        where = self.dirs.get(event.wd)
        if where is None:
            return
        if event.mask & inotify.IN_IGNORED:
            del self.dirs[event.wd]
            return
        if event.mask & (inotify.IN_DELETE_SELF | inotify.IN_MOVE_SELF) or not event.name:
            return  # its parent reports it
        is_dir = bool(event.mask & inotify.IN_ISDIR)
        rel = f"{where.rel}/{event.name}" if where.rel else event.name
        index = where.target
        if event.mask & inotify.IN_CREATE:
            self._note(index, rel, "created", is_dir, where.ignore)
            if is_dir and self.recursive:
                self._new_dir(where, rel)
        elif event.mask & (inotify.IN_MODIFY | inotify.IN_CLOSE_WRITE):
            self._note(index, rel, "modified", is_dir, where.ignore)
        elif event.mask & inotify.IN_DELETE:
            self._note(index, rel, "deleted", is_dir, where.ignore)
        elif event.mask & inotify.IN_MOVED_FROM:
            self._moves[event.cookie] = (event.wd, rel, is_dir)
        elif event.mask & inotify.IN_MOVED_TO:
            source = self._moves.pop(event.cookie, None)
            if source is not None and self.dirs.get(source[0]) is not None:
                src_index = self.dirs[source[0]].target
                self._moved(src_index, source[1], index, rel, is_dir, where.ignore)
            else:
                self._note(index, rel, "created", is_dir, where.ignore)
                if is_dir and self.recursive:
                    self._new_dir(where, rel)

    def _new_dir(self, parent: _Dir, rel: str) -> None:
        target = self.targets[parent.target]
        if self.exclude and self.exclude.matches(self._display(parent.target, rel)):
            return
        if parent.ignore is not None and parent.ignore.ignored(rel, True):
            return
        ignore = None
        if parent.ignore is not None:
            with contextlib.suppress(OSError):
                sub = open_below(target.fd, rel)
                try:
                    ignore = parent.ignore.enter(sub, rel)
                finally:
                    os.close(sub)
        with contextlib.suppress(TooLarge):
            self._watch_tree(parent.target, rel, ignore, announce=True)

    def _moved(
        self,
        src_index: int,
        src: str,
        index: int,
        rel: str,
        is_dir: bool,
        ignore: IgnoreStack | None,
    ) -> None:
        if is_dir:
            for d in self.dirs.values():  # the watches below it moved with it
                if d.target == src_index and (d.rel == src or d.rel.startswith(src + "/")):
                    d.target, d.rel = index, rel + d.rel[len(src) :]
        old = self._display(src_index, src)
        new = self._display(index, rel)
        if not self._wanted(old, src, is_dir, None) and not self._wanted(new, rel, is_dir, ignore):
            return
        was = self._pending.pop((old, None), None)
        self._pending.pop((new, None), None)
        if was == "created":  # came and moved within the window: it appeared there
            self._note(index, rel, "created", is_dir, ignore)
            return
        self._push((old, new), "moved", is_dir)

    def _wanted(self, display: str, rel: str, is_dir: bool, ignore: IgnoreStack | None) -> bool:
        if self.exclude and self.exclude.matches(display):
            return False
        if self.include and not self.include.matches(display):
            return False
        return not (ignore is not None and ignore.ignored(rel, is_dir))

    def _note(
        self, index: int, rel: str, kind: str, is_dir: bool, ignore: IgnoreStack | None = None
    ) -> None:
        display = self._display(index, rel)
        if not self._wanted(display, rel, is_dir, ignore):
            return
        key = (display, None)
        before = self._pending.get(key)
        if before is not None:
            del self._pending[key]  # re-inserted at the end: events stay in order
            if kind == "modified" and before == "created":
                kind = "created"
            elif kind == "deleted" and before == "created":
                return  # came and went within the window
            elif kind == "created" and before == "deleted":
                kind = "modified"
        self._push(key, kind, is_dir)

    def _push(self, key: tuple[str, str | None], kind: str, is_dir: bool) -> None:
        if self._flooded:
            return
        if len(self._pending) >= MAX_PENDING:
            self._overflow()
            return
        self._pending[key] = kind
        self._is_dir[key[0]] = is_dir

    def _overflow(self) -> None:
        self._pending.clear()
        self._is_dir.clear()
        if not self._flooded:
            self._flooded = True
            self.on_lines([{"type": "overflow"}])

    def _flush(self) -> None:
        self._timer = None
        for wd, rel, is_dir in self._moves.values():  # moved out of every watched directory
            where = self.dirs.get(wd)
            if where is not None:
                if is_dir:
                    self._forget(where.target, rel)
                self._note(where.target, rel, "deleted", is_dir, where.ignore)
        self._moves.clear()
        if self._flooded:
            calm = self._window < MAX_PENDING // 8
            self._window = 0
            if calm:
                self._flooded = False
            else:
                assert self._loop is not None
                self._timer = self._loop.call_later(COALESCE_S, self._flush)
            return
        self._window = 0
        lines: list[dict[str, Any]] = []
        for (path, to), kind in self._pending.items():
            line: dict[str, Any] = {"type": kind, "path": path}
            if to is not None:
                line["to"] = to
            line["is_dir"] = self._is_dir.get(path, False)
            lines.append(line)
        self._pending.clear()
        self._is_dir.clear()
        if lines:
            self.on_lines(lines)

    def _forget(self, index: int, rel: str) -> None:
        for wd, d in list(self.dirs.items()):
            if d.target == index and (d.rel == rel or d.rel.startswith(rel + "/")):
                with contextlib.suppress(OSError):
                    inotify.rm_watch(self.fd, wd)
                del self.dirs[wd]

    def flood(self) -> None:
        """The client does not keep up: the lines it has not taken are lost."""
        self._overflow()
