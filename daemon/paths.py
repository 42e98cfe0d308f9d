"""Roots and the one path resolver every tool goes through.

Containment is decided on the resolved *real* path, compared by path
components (``/srv/ws2`` is not inside ``/srv/ws``). For a path that does not
exist yet, the real path of its deepest existing ancestor plus the remaining
segments is used, so a new file under a symlinked directory that points out of
the workspace is caught before anything is created.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from . import openat2
from .errors import (
    AirlockError,
    Conflict,
    Forbidden,
    GeneratedFile,
    InvalidRequest,
    IsDirectory,
    NotFound,
    PathEscape,
)

Intent = Literal["read", "write"]

DEFAULT_GENERATED_FILES: frozenset[str] = frozenset(
    {
        "package-lock.json",
        "pnpm-lock.yaml",
        "yarn.lock",
        "bun.lock",
        "bun.lockb",
        "poetry.lock",
        "uv.lock",
        "Cargo.lock",
    }
)
DEFAULT_GENERATED_DIRS: frozenset[str] = frozenset(
    {"node_modules", "dist", ".next", "coverage", "vendor-compiled", ".git"}
)


@dataclass(frozen=True)
class GeneratedFileGuard:
    """Refuses edits to lockfiles and build output; whole path segments only."""

    file_names: frozenset[str] = DEFAULT_GENERATED_FILES
    dir_names: frozenset[str] = DEFAULT_GENERATED_DIRS

    def reason(self, relative: PurePosixPath) -> str | None:
        parts = relative.parts
        if parts and parts[-1] in self.file_names:
            return f"{parts[-1]} is a generated lockfile"
        for segment in parts[:-1]:
            if segment in self.dir_names:
                return f"it lies under {segment}/, which holds generated files"
        if parts and parts[-1] in self.dir_names:
            return f"{parts[-1]} is a generated directory"
        return None


@dataclass(frozen=True)
class ResolvedPath:
    """A path that passed containment.

    ``real`` is what the tool touches; ``display`` is what it reports back
    (relative to the workspace when inside it, else absolute).
    """

    real: Path
    root: Path
    display: str

    @property
    def relative(self) -> PurePosixPath:
        return PurePosixPath(self.real.relative_to(self.root).as_posix())

    @property
    def parts(self) -> list[str]:
        """The components below ``root`` (none for the root itself), by string slicing:
        the resolver's hot path avoids pathlib."""
        real, root = str(self.real), str(self.root)
        if real == root:
            return []
        rest = real[len(root) :].lstrip("/") if real.startswith(root) else None
        if rest is None:
            return [p for p in self.relative.parts if p != "."]
        return rest.split("/") if rest else []


def real_path(candidate: Path) -> Path:
    """The real path of ``candidate``, following every symlink that exists.

    ``os.path.realpath`` in non-strict mode resolves the existing prefix and
    appends the rest, and follows dangling links to their (outside) target, which
    is exactly the containment question we need answered.
    """
    return Path(real_path_str(os.fspath(candidate)))


_O_PATH: int | None = getattr(os, "O_PATH", None)


def real_path_str(candidate: str) -> str:
    """``os.path.realpath(candidate)``, asking the kernel first when the path exists.

    ``realpath`` lstats every component from ``/`` in Python (~15 µs for four
    components, more for deep trees). For a path that exists, opening it with
    ``O_PATH`` (no read access, no device or FIFO side effects, nothing
    blocks on a FIFO) lets the kernel follow every link, and
    ``/proc/self/fd/N`` names where it landed: the same answer in three
    syscalls. Anything unusual (a missing or dangling path, a loop, no
    ``/proc``, an unlinked or unreachable file) goes to ``os.path.realpath``,
    so the result is always what ``realpath`` would say.
    """
    if _O_PATH is not None and candidate.startswith("/"):
        try:
            fd = os.open(candidate, _O_PATH | os.O_CLOEXEC)
        except OSError:
            pass
        else:
            try:
                landed = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                landed = ""
            finally:
                os.close(fd)
            if landed.startswith("/") and not landed.endswith(" (deleted)"):
                return landed
    return os.path.realpath(candidate)


_SETTLE_ATTEMPTS = 3


def _real_path_settled(candidate: str, raw: str) -> str:
    """``real_path_str``, retried while the path is being swapped under it.

    ``realpath`` stats a component, then reads it as a link; a process that
    swaps a directory and a symlink in between makes ``readlink`` fail
    (EINVAL). That is the caller's race, not the daemon's fault: it gets a
    ``conflict`` that says to retry, never ``internal``. Confinement does not
    depend on this name (every later open is fd-relative from a root).
    """
    for _ in range(_SETTLE_ATTEMPTS):
        try:
            return real_path_str(candidate)
        except OSError:
            continue
    raise Conflict(
        f"{raw!r} kept changing while it was being resolved (another process is renaming "
        "or relinking it); retry once it is stable",
        {"path": raw},
    )


def _is_within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _is_within_str(path: str, root: str) -> bool:
    """``_is_within`` on normalised absolute strings (real paths): same answer, no pathlib.

    ``resolve`` runs on every file tool call; comparing strings instead of
    ``PurePath`` parts takes it from ~30 µs to about half (most of the rest is
    ``realpath`` itself).
    """
    if path == root:
        return True
    return path.startswith(root if root.endswith("/") else root + "/")


def _depth(real: str) -> int:
    """``len(Path(real).parts)`` for a normalised absolute path."""
    return 1 if real == "/" else 1 + real.count("/")


@dataclass
class Roots:
    """The workspace, the extra roots, and the artifacts directory."""

    workspace: Path
    extra: tuple[Path, ...] = ()
    artifacts: Path | None = None
    guard: GeneratedFileGuard = field(default_factory=GeneratedFileGuard)
    # Owner (uid, gid) for files and directories the tools create: the exec user's,
    # set when the daemon runs as root with --exec-user, so the agent can edit them.
    new_owner: tuple[int, int] | None = None
    _roots_cache: dict[str, tuple[tuple[object, ...], tuple[tuple[str, Path], ...]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _fds: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    _cached_lookups: bool = field(default=True, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.workspace = real_path(self.workspace)
        self.extra = tuple(real_path(p) for p in self.extra)
        if self.artifacts is not None:
            self.artifacts = real_path(self.artifacts)
        weakref.finalize(self, _close_fds, self._fds)

    def display(self, real: Path) -> str:
        if _is_within(real, self.workspace):
            rel = real.relative_to(self.workspace).as_posix()
            return rel or "."
        return str(real)

    def _display_str(self, real: str) -> str:
        """``display`` for a real path given as a string (the resolver's fast path)."""
        ws = str(self.workspace)
        if real == ws:
            return "."
        if _is_within_str(real, ws):
            return real[len(ws) :] if ws == "/" else real[len(ws) + 1 :]
        return real

    def resolve(
        self,
        raw: str,
        *,
        intent: Intent = "read",
        granted: Sequence[str | Path] = (),
        check_generated: bool | None = None,
    ) -> ResolvedPath:
        """Resolve ``raw`` for a read or a write, or raise ``PathEscape``.

        ``granted`` are absolute paths the orchestrator approved for this one
        call; they count as roots. Writes may not touch the artifacts directory
        and are checked against the generated-file guard.
        """
        if "\x00" in raw:
            raise PathEscape("the path contains a NUL byte; pass a plain path")
        if raw == "":
            raw = "."
        expanded = os.path.expanduser(raw) if raw.startswith("~") else raw
        # realpath normalises "//", "." and ".." itself, exactly as Path() + realpath did.
        if not expanded.startswith("/"):
            expanded = os.path.join(str(self.workspace), expanded)
        resolved = _real_path_settled(expanded, raw)
        root = self._root_for_str(resolved, intent, granted)
        if root is None:
            raise PathEscape(
                f"{raw!r} resolves to {resolved}, outside the workspace {self.workspace}"
                + (" and the extra roots" if self.extra else "")
                + "; use a path inside the workspace",
                {"path": raw},
            )
        result = ResolvedPath(real=Path(resolved), root=root, display=self._display_str(resolved))
        if check_generated if check_generated is not None else intent == "write":
            reason = self.guard.reason(result.relative)
            if reason is not None:
                raise GeneratedFile(
                    f"refusing to edit {result.display}: {reason}. Change its source and "
                    "regenerate it with the project's own tool instead.",
                    {"path": result.display},
                )
        return result

    def _root_for_str(
        self, resolved: str, intent: Intent, granted: Iterable[str | Path]
    ) -> Path | None:
        if (
            intent == "write"
            and self.artifacts is not None
            and _is_within_str(resolved, str(self.artifacts))
        ):
            return None
        for text, root in self._ordered_roots(intent, granted):
            if _is_within_str(resolved, text):
                return root
        return None

    def _ordered_roots(
        self, intent: Intent, granted: Iterable[str | Path]
    ) -> Sequence[tuple[str, Path]]:
        """Candidate roots, most specific first, so relative displays are as short as possible.

        Without granted paths the answer only depends on the roots, so it is
        kept (keyed on the root objects, in case someone replaces them).
        """
        granted_roots = [real_path(Path(g)) for g in granted if Path(g).is_absolute()]
        key = (self.workspace, self.extra, self.artifacts, intent)
        if not granted_roots:
            cached = self._roots_cache.get(intent)
            if cached is not None and cached[0] == key:
                return cached[1]
        roots: list[Path] = [self.workspace, *self.extra, *granted_roots]
        if intent == "read" and self.artifacts is not None:
            roots.append(self.artifacts)
        keyed = [(str(r), r) for r in roots]
        ordered = tuple(sorted(keyed, key=lambda pair: _depth(pair[0]), reverse=True))
        if not granted_roots:
            self._roots_cache[intent] = (key, ordered)
        return ordered

    # ------------------------------------------------------------ race-free opening
    #
    # ``resolve`` above decides *which* root a path belongs to and how it is
    # shown; it works on names, so by itself it could be raced (a directory
    # swapped for a symlink between the check and the use). Everything that
    # touches the file system therefore goes through the methods below: they
    # start from an open fd of the root and walk the path relative to it, with
    # ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`` when the kernel has it
    # and an ``O_NOFOLLOW`` component walk otherwise. Callers get fds (a parent
    # directory fd plus the final name, or the opened file) and never a path
    # string to open again.

    def root_fd(self, root: Path) -> int:
        """A kept ``O_RDONLY | O_DIRECTORY`` fd of a configured root, opened on first use."""
        key = str(root)
        fd = self._fds.get(key)
        if fd is None:
            opened = os.open(key, _DIR_FLAGS)
            # Two worker threads may open it at once: one fd is kept, the other closed.
            fd = self._fds.setdefault(key, opened)
            if fd != opened:
                os.close(opened)
        return fd

    def _configured(self) -> list[Path]:
        out = [self.workspace, *self.extra]
        if self.artifacts is not None:
            out.append(self.artifacts)
        return out

    @contextlib.contextmanager
    def root_dir(self, root: Path) -> Iterator[int]:
        """The root's fd: kept for configured roots; a granted root is reached by a walk
        from the configured root holding it (so it cannot be raced either), or opened by
        name when it lies outside every configured root (the orchestrator's own path)."""
        kept = self._fds.get(str(root))
        if kept is not None:
            yield kept
            return
        if root in self._configured():
            yield self.root_fd(root)
            return
        text = str(root)
        for base in sorted(self._configured(), key=lambda p: _depth(str(p)), reverse=True):
            if _is_within_str(text, str(base)):
                rel = text[len(str(base)) :].strip("/")
                fd = self._walk(base, rel.split("/") if rel else [], create=False, display=text)
                break
        else:
            fd = os.open(text, _DIR_FLAGS)
        try:
            yield fd
        finally:
            os.close(fd)

    def _walk(
        self,
        root: Path,
        parts: Sequence[str],
        *,
        create: bool,
        display: str,
        mode: int = 0o777,
    ) -> int:
        """An fd (``O_RDONLY | O_DIRECTORY``) of the directory ``parts`` names under ``root``.

        Raises the tool-facing errors (``not_found``, ``path_escape``,
        ``invalid_request``); ``create`` makes missing directories (owned by
        :attr:`new_owner` when set).
        """
        if not create and openat2.available():
            with self.root_dir(root) as base:
                return _beneath(base, "/".join(parts) or ".", display)
        return self._component_walk(root, list(parts), create=create, display=display, mode=mode)

    def _component_walk(
        self, root: Path, parts: list[str], *, create: bool, display: str, mode: int
    ) -> int:
        """The fallback walk: one ``openat(O_NOFOLLOW)`` per component, symlinks resolved here.

        A symlink met on the way is read (at most ``MAX_LINKS``) and its target
        walked instead: a relative target from the directory holding the link,
        an absolute one only when it lies inside a root (re-rooted there), and
        ``..`` never above the root the walk is in. Every step opens relative to
        a directory fd already held, so nothing swapped meanwhile can lead out.
        """
        with self.root_dir(root) as base:
            stack = [os.dup(base)]
        pending = list(reversed(parts))
        links = 0
        try:
            while pending:
                part = pending.pop()
                if part in ("", "."):
                    continue
                if part == "..":
                    if len(stack) == 1:
                        raise _escape(display)
                    os.close(stack.pop())
                    continue
                current = stack[-1]
                try:
                    fd = os.open(part, _DIR_FLAGS_NOFOLLOW, dir_fd=current)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(part, mode, dir_fd=current)
                    except FileExistsError:
                        pass  # made meanwhile: opened (and type-checked) below
                    else:
                        self._own(current, part)
                    fd = os.open(part, _DIR_FLAGS_NOFOLLOW, dir_fd=current)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    try:
                        target = os.readlink(part, dir_fd=current)
                    except OSError:
                        raise exc from None  # not a link: a file where a directory should be
                    links += 1
                    if links > MAX_LINKS:
                        raise OSError(errno.ELOOP, "too many levels of symbolic links") from None
                    if target.startswith("/"):
                        landed = self._rebase(target)
                        if landed is None:
                            raise _escape(display) from None
                        new_root, rest = landed
                        with self.root_dir(new_root) as new_base:
                            fresh = os.dup(new_base)
                        for held in stack:
                            os.close(held)
                        stack = [fresh]
                        pending.extend(reversed(rest))
                    else:
                        pending.extend(reversed(target.split("/")))
                    continue
                stack.append(fd)
            result = stack.pop()
        finally:
            for held in stack:
                os.close(held)
        return result

    def _rebase(self, target: str) -> tuple[Path, list[str]] | None:
        """An absolute link target as (root, components under it), if it lies in a root."""
        norm = os.path.normpath(target)
        for text, root in self._ordered_roots("read", ()):
            if _is_within_str(norm, text):
                rel = norm[len(text) :].strip("/")
                return root, rel.split("/") if rel else []
        return None

    def _own(self, dir_fd: int, name: str) -> None:
        """Give a file or directory the tools just made to the exec user (daemon as root)."""
        if self.new_owner is not None:
            with contextlib.suppress(OSError):
                os.chown(name, *self.new_owner, dir_fd=dir_fd, follow_symlinks=False)

    @contextlib.contextmanager
    def parent(self, resolved: ResolvedPath, *, create_dirs: bool = False) -> Iterator[Anchor]:
        """The open directory holding ``resolved`` and its final name; the fd is closed after.

        ``create_dirs`` makes missing directories on the way. The walk's errors
        are the tool-facing ones: a missing directory is ``not_found``, a file
        where a directory should be ``invalid_request``, a way out
        ``path_escape``.
        """
        parts = resolved.parts
        if not parts:
            # The root itself: its "parent" is the root, named ".".
            fd = self._guarded_walk(resolved, [], create=False)
            name = "."
        else:
            fd = self._guarded_walk(resolved, list(parts[:-1]), create=create_dirs)
            name = parts[-1]
        try:
            yield Anchor(fd, name, resolved.display)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def directory(self, resolved: ResolvedPath) -> Iterator[int]:
        """An open fd of the directory ``resolved`` names (``is_directory``'s opposite refused)."""
        fd = self._guarded_walk(resolved, resolved.parts, create=False)
        try:
            yield fd
        finally:
            os.close(fd)

    def _guarded_walk(self, resolved: ResolvedPath, parts: list[str], *, create: bool) -> int:
        try:
            return self._walk(resolved.root, parts, create=create, display=resolved.display)
        except AirlockError:
            raise
        except OSError as exc:
            raise walk_error(exc, resolved.display) from None

    @contextlib.contextmanager
    def open_regular(self, resolved: ResolvedPath) -> Iterator[tuple[int, os.stat_result]]:
        """``resolved`` opened read-only, only if it is a regular file (FIFOs never block)."""
        fd, st = self.open_file(resolved)
        try:
            yield fd, st
        finally:
            os.close(fd)

    def open_for_read(
        self, raw: str, granted: Sequence[str | Path] = ()
    ) -> tuple[ResolvedPath, int, os.stat_result]:
        """Resolve ``raw`` for reading and open it (regular files only); the caller closes the fd.

        The usual case (a relative path with no ``..``, no granted paths) is one
        ``openat2`` beneath the workspace fd; the kernel's own record of what it
        opened (``/proc/self/fd``) then gives the real path and the display. So
        the race-free read costs no more syscalls than the old resolve-then-open.
        Anything else (a link leaving the workspace for an extra root, ``..``, an
        absolute path) takes the general path: :meth:`resolve` then :meth:`open_file`.
        """
        if not granted:
            try:
                opened = self._open_beneath_workspace(raw, _RESOLVE)
            except OSError:
                opened = None
            if opened is not None:
                return opened
        resolved = self.resolve(raw, intent="read", granted=granted)
        fd, st = self.open_file(resolved)
        return resolved, fd, st

    def open_cached_for_read(self, raw: str) -> tuple[ResolvedPath, int, os.stat_result] | None:
        """:meth:`open_for_read`'s usual case, only if it cannot wait for the disk, else None.

        ``RESOLVE_CACHED`` makes the kernel answer EAGAIN rather than read a
        directory from storage, so this may run on the event loop; None (any
        doubt: not cached, an unusual path, a kernel without the flag) sends
        the caller to the thread that runs :meth:`open_for_read`. Confinement
        is the same ``RESOLVE_BENEATH`` lookup; refusals (a FIFO, a directory)
        raise exactly what the general path raises.
        """
        if not self._cached_lookups:
            return None
        try:
            return self._open_beneath_workspace(raw, _RESOLVE | openat2.RESOLVE_CACHED)
        except OSError as exc:
            if exc.errno == errno.EINVAL:  # the kernel predates RESOLVE_CACHED: stop asking
                self._cached_lookups = False
            return None

    def _open_beneath_workspace(
        self, raw: str, resolve: int
    ) -> tuple[ResolvedPath, int, os.stat_result] | None:
        """One ``openat2`` beneath the workspace fd for a plain relative path; the kernel's
        own record of what it opened (``/proc/self/fd``) gives the real path and display.
        None when the path is not that simple or lands outside every root (the general
        path then gives the full answer); OSError from the lookup itself."""
        if not (
            raw
            and raw[0] not in "/~"
            and ".." not in raw
            and "\x00" not in raw
            and openat2.available()
        ):
            return None
        base = self._fds.get(str(self.workspace))
        if base is None:
            base = self.root_fd(self.workspace)
        fd = openat2.openat2(base, raw, _FILE_FLAGS, resolve)
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
            root = (
                self._root_for_str(real, "read", ())
                if real.startswith("/") and not real.endswith(" (deleted)")
                else None
            )
            if root is not None:
                resolved = ResolvedPath(Path(real), root, self._display_str(real))
                st = os.fstat(fd)
                check_regular(st, resolved.display)
                return resolved, fd, st
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        return None

    def open_file(self, resolved: ResolvedPath) -> tuple[int, os.stat_result]:
        """Open ``resolved`` read-only if it is a regular file; the caller closes the fd.

        With ``openat2`` this is one call from the kept root fd (``RESOLVE_BENEATH``,
        ``O_NOFOLLOW`` for the last component) plus ``fstat``: the same syscalls the
        old open-by-name took. Anything unusual goes the general way (parent + name).
        """
        parts = resolved.parts
        base = self._fds.get(str(resolved.root))
        if parts and base is not None and openat2.available():
            try:
                fd = openat2.openat2(base, "/".join(parts), _FILE_FLAGS, _RESOLVE)
            except OSError as exc:
                if exc.errno == errno.EXDEV:
                    raise _escape(resolved.display) from None
                if exc.errno not in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP, errno.EAGAIN):
                    if exc.errno == errno.ELOOP:
                        raise _link_refused(resolved.display) from None
                    raise walk_error(exc, resolved.display) from None
            else:
                return regular_fd(fd, resolved.display)
        with self.parent(resolved) as anchor:
            return anchor.open_regular()

    def close(self) -> None:
        """Close the kept root fds (a daemon keeps them for its lifetime)."""
        while self._fds:
            _, fd = self._fds.popitem()
            with contextlib.suppress(OSError):
                os.close(fd)


MAX_LINKS = 40
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NONBLOCK
_DIR_FLAGS_NOFOLLOW = _DIR_FLAGS | os.O_NOFOLLOW
_FILE_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW
_RESOLVE = openat2.RESOLVE_BENEATH | openat2.RESOLVE_NO_MAGICLINKS


def _escape(display: str) -> PathEscape:
    return PathEscape(
        f"{display} leads outside its root through a symbolic link (perhaps one that changed "
        "while the call ran); nothing was read or written. Use a path inside the workspace.",
        {"path": display},
    )


def _link_refused(display: str) -> InvalidRequest:
    return InvalidRequest(
        f"{display} is a symbolic link (or became one while the call ran, or links loop); "
        "name the file it points to",
        {"path": display},
    )


def _beneath(base: int, rel: str, display: str) -> int:
    """``openat2`` below ``base``; a concurrent rename (``EAGAIN``) is retried, then walked."""
    for _ in range(8):
        try:
            return openat2.openat2(base, rel, _DIR_FLAGS, _RESOLVE)
        except OSError as exc:
            if exc.errno == errno.EXDEV:
                raise _escape(display) from None
            if exc.errno != errno.EAGAIN:
                raise
    raise OSError(errno.EAGAIN, "the path kept changing while it was resolved", display)


_WALK_ERRORS: dict[int, tuple[type[AirlockError], str]] = {
    errno.ENOENT: (
        NotFound,
        " (or a directory on its way) does not exist; check the path with file_list, or pass "
        "create_dirs=true where the tool offers it",
    ),
    errno.ENOTDIR: (
        InvalidRequest,
        ": a component of this path is a file, not a directory; pick a path whose directories "
        "are directories",
    ),
    errno.ELOOP: (
        InvalidRequest,
        ": too many levels of symbolic links (a loop, or a link where a plain file was "
        "expected); use the path the link points to",
    ),
    errno.ENAMETOOLONG: (
        InvalidRequest,
        ": a name in this path is too long for the file system; use a shorter name",
    ),
    errno.EACCES: (
        Forbidden,
        ": permission denied by the file system; fix its permissions with exec",
    ),
    errno.EAGAIN: (Conflict, " kept changing while it was resolved; retry the call"),
}
_WALK_ERRORS[errno.EPERM] = _WALK_ERRORS[errno.EACCES]
"""Each errno a walk meets: the envelope, and what follows the path in its message."""


def walk_error(exc: OSError, display: str) -> AirlockError:
    """The envelope for an ``OSError`` met while walking to or opening ``display``."""
    known = _WALK_ERRORS.get(exc.errno or 0)
    if known is None:
        return InvalidRequest(f"{display}: {exc.strerror or exc}", {"path": display})
    envelope, rest = known
    if exc.errno == errno.ENAMETOOLONG:  # the path itself may be huge: quote its start
        return envelope(display[:200] + rest, {"path": display[:1000]})
    return envelope(display + rest, {"path": display})


@dataclass(frozen=True)
class Anchor:
    """An open directory and one name in it: what every file operation starts from.

    ``dir_fd`` is owned by the ``Roots.parent`` block that made it; all operations
    are relative to it (``os.open(name, dir_fd=...)``, ``os.rename`` with dir fds,
    ``os.stat(..., follow_symlinks=False)``), so the path string is never used again.
    """

    dir_fd: int
    name: str
    display: str

    def lstat(self) -> os.stat_result | None:
        try:
            return os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise walk_error(exc, self.display) from None

    def open_regular(self) -> tuple[int, os.stat_result]:
        """Open the name read-only (``O_NONBLOCK | O_NOFOLLOW``); refuse anything not regular."""
        try:
            fd = os.open(self.name, _FILE_FLAGS, dir_fd=self.dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
                # A socket (or a device without a driver) cannot be opened at all.
                st = self.lstat()
                if st is not None:
                    check_regular(st, self.display)
            if exc.errno == errno.ELOOP:
                raise _link_refused(self.display) from None
            raise walk_error(exc, self.display) from None
        return regular_fd(fd, self.display)


def regular_fd(fd: int, display: str) -> tuple[int, os.stat_result]:
    """``fd`` and its stat when it is a regular file; otherwise it is closed and the
    refusal raised (the last step of every open of a file to read or edit)."""
    try:
        st = os.fstat(fd)
        check_regular(st, display)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def lstat_existing(roots: Roots, target: ResolvedPath, next_step: str) -> os.stat_result:
    """``target``'s own lstat, asked through its parent's fd (a link is not followed);
    a missing target is ``not_found`` saying ``next_step``."""
    with roots.parent(target) as anchor:
        st = anchor.lstat()
    if st is None:
        raise NotFound(f"{target.display} does not exist; {next_step}", {"path": target.display})
    return st


def check_regular(st: os.stat_result, display: str) -> None:
    """Directories get ``is_directory``; FIFOs, sockets and devices ``invalid_request``."""
    if stat.S_ISREG(st.st_mode):
        return
    if stat.S_ISDIR(st.st_mode):
        raise IsDirectory(f"{display} is a directory; list it with file_list", {"path": display})
    kind = (
        "a FIFO"
        if stat.S_ISFIFO(st.st_mode)
        else "a socket"
        if stat.S_ISSOCK(st.st_mode)
        else "a device"
        if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
        else "not a plain file"
    )
    raise InvalidRequest(
        f"{display} is not a regular file ({kind}); the file tools only read and edit regular "
        "files; inspect it with exec",
        {"path": display},
    )


def _close_fds(fds: dict[str, int]) -> None:
    for fd in fds.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()
