"""One type checker process's share of a check: its files, and how to run it.

Apart from :mod:`.types` (which plans the groups) so the checker modules it
dispatches to (:mod:`.typescript`) can take a group without importing back up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .procs import READ_SCOPE, RunAs


@dataclass
class TypeGroup:
    """Files one checker process handles, and how to run it."""

    tool: str  # "basedpyright" | "typescript"
    cwd: Path
    files: dict[Path, str] = field(default_factory=dict)  # real -> display
    config: Path | None = None
    typescript: Path | None = None
    python: Path | None = None
    run_as: RunAs = READ_SCOPE
    env: dict[str, str] | None = None
