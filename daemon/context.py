"""What every tool needs from the daemon, gathered in one object.

Tools are plain async functions ``tool(ctx, request) -> output``; the context
replaces module globals, so two workspaces can live in one process (tests do
exactly that) and nothing is shared by accident.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .diagnostics.service import DiagnosticsService
from .fsio import PathLocks
from .identity import ExecUser
from .paths import (
    DEFAULT_GENERATED_DIRS,
    DEFAULT_GENERATED_FILES,
    GeneratedFileGuard,
    Intent,
    ResolvedPath,
    Roots,
)
from .procs.spill import SpillStore
from .procs.table import ProcessTable


@dataclass
class DaemonConfig:
    """Everything that shapes a daemon's behaviour; CLI flags and the config file map onto it."""

    workspace: Path
    extra_roots: tuple[Path, ...] = ()
    artifacts_dir: Path | None = None
    state_dir: Path | None = None
    generated_files: frozenset[str] = DEFAULT_GENERATED_FILES
    generated_dirs: frozenset[str] = DEFAULT_GENERATED_DIRS
    max_text_bytes: int = 64 * 1024 * 1024
    max_image_bytes: int = 32 * 1024 * 1024
    search_timeout_s: float = 30.0
    diagnostics_timeout_s: float = 20.0
    # Who agent programs run as (--exec-user); None runs them as the daemon's own user.
    exec_user: ExecUser | None = None
    # exec spill files: at most this much per command, and the artifacts dir's quota.
    exec_spill_max_bytes: int = 256 * 1024 * 1024
    artifacts_quota_bytes: int = 1024 * 1024 * 1024

    def __post_init__(self) -> None:
        self.workspace = Path(self.workspace).expanduser().resolve()
        if self.artifacts_dir is None:
            self.artifacts_dir = Path(tempfile.gettempdir()) / "airlockd" / "artifacts"
        if self.state_dir is None:
            self.state_dir = Path(self.artifacts_dir).parent / "state"

    @property
    def artifacts(self) -> Path:
        assert self.artifacts_dir is not None
        return Path(self.artifacts_dir)

    @property
    def state(self) -> Path:
        assert self.state_dir is not None
        return Path(self.state_dir)


def new_file_owner(user: ExecUser | None) -> tuple[int, int] | None:
    """Who owns what the file tools create: the exec user when the daemon runs as root
    (so the agent can edit it); otherwise nobody is chowned (files are the daemon's)."""
    if user is None or os.geteuid() != 0 or user.is_current:
        return None
    return (user.uid, user.gid)


@dataclass
class ToolContext:
    config: DaemonConfig
    roots: Roots
    locks: PathLocks = field(default_factory=PathLocks)
    root_locks: PathLocks = field(default_factory=PathLocks)
    diagnostics: DiagnosticsService | None = None
    engines: dict[str, Any] = field(default_factory=dict)
    # Background processes and exec spills (airlock.daemon.procs); set by create().
    processes: ProcessTable | None = None

    @classmethod
    def create(cls, config: DaemonConfig) -> ToolContext:
        config.artifacts.mkdir(parents=True, exist_ok=True)
        config.state.mkdir(parents=True, exist_ok=True)
        roots = Roots(
            workspace=config.workspace,
            extra=config.extra_roots,
            artifacts=config.artifacts,
            guard=GeneratedFileGuard(config.generated_files, config.generated_dirs),
            new_owner=new_file_owner(config.exec_user),
        )
        ctx = cls(config=config, roots=roots)
        ctx.diagnostics = DiagnosticsService(
            roots.workspace, config.diagnostics_timeout_s, exec_user=config.exec_user, roots=roots
        )
        ctx.processes = ProcessTable(
            SpillStore(config.artifacts, config.exec_spill_max_bytes, config.artifacts_quota_bytes)
        )
        return ctx

    def resolve(
        self, raw: str, *, intent: Intent = "read", granted: Sequence[str] = ()
    ) -> ResolvedPath:
        return self.roots.resolve(raw, intent=intent, granted=granted)

    @property
    def procs(self) -> ProcessTable:
        assert self.processes is not None
        return self.processes

    @property
    def diag(self) -> DiagnosticsService:
        assert self.diagnostics is not None
        return self.diagnostics
