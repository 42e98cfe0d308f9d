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
    return Path(os.path.realpath(candidate))


def _is_within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


@dataclass
class Roots:
    """The workspace, the extra roots, and the artifacts directory."""

    workspace: Path
    extra: tuple[Path, ...] = ()
    artifacts: Path | None = None
    guard: GeneratedFileGuard = field(default_factory=GeneratedFileGuard)

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
        candidate = Path(expanded)
        if not candidate.is_absolute():
            candidate = self.workspace / candidate
        resolved = real_path(candidate)
        root = self._root_for(resolved, intent, granted)
        if root is None:
            raise PathEscape(
                f"{raw!r} resolves to {resolved}, outside the workspace {self.workspace}"
                + (" and the extra roots" if self.extra else "")
                + "; use a path inside the workspace",
                {"path": raw},
            )
        result = ResolvedPath(real=resolved, root=root, display=self.display(resolved))
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
        roots: list[Path] = [self.workspace, *self.extra]
        roots.extend(real_path(Path(g)) for g in granted if Path(g).is_absolute())
        if intent == "read" and self.artifacts is not None:
            roots.append(self.artifacts)
        if (
            intent == "write"
            and self.artifacts is not None
            and _is_within(resolved, self.artifacts)
        ):
            return None
        # The most specific root wins, so relative displays are as short as possible.
        for root in sorted(roots, key=lambda r: len(r.parts), reverse=True):
            if _is_within(resolved, root):
                return root
        return None

    def recheck(self, resolved: ResolvedPath) -> None:
        """Re-resolve right before a write: a symlink swapped in since planning is refused."""
        again = real_path(resolved.real)
        if again != resolved.real or not _is_within(again, resolved.root):
            raise PathEscape(
                f"{resolved.display} changed into a link leaving its root while the edit was "
                "planned; nothing was written",
                {"path": resolved.display},
            )
