"""Roots and the one path resolver every tool goes through.

Containment is decided on the resolved *real* path, compared by path
components (``/srv/ws2`` is not inside ``/srv/ws``). For a path that does not
exist yet, the real path of its deepest existing ancestor plus the remaining
segments is used, so a new file under a symlinked directory that points out of
the workspace is caught before anything is created.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from airlock.daemon.errors import GeneratedFile, PathEscape

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
    _roots_cache: dict[str, tuple[tuple[object, ...], tuple[tuple[str, Path], ...]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self.workspace = real_path(self.workspace)
        self.extra = tuple(real_path(p) for p in self.extra)
        if self.artifacts is not None:
            self.artifacts = real_path(self.artifacts)

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
        resolved = real_path_str(expanded)
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

    def _root_for(
        self, resolved: Path, intent: Intent, granted: Iterable[str | Path]
    ) -> Path | None:
        return self._root_for_str(str(resolved), intent, granted)

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

    def recheck(self, resolved: ResolvedPath) -> None:
        """Re-resolve right before a write: a symlink swapped in since planning is refused."""
        again = real_path(resolved.real)
        if again != resolved.real or not _is_within(again, resolved.root):
            raise PathEscape(
                f"{resolved.display} changed into a link leaving its root while the edit was "
                "planned; nothing was written",
                {"path": resolved.display},
            )
