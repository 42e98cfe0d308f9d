"""Suite-wide settings and guards: nothing here but what every test directory needs.

Shared fixtures and helpers live in ``tests/fakes/`` (processes, ports, polling:
``tests/fakes/wait.py``) and are imported where used.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

# Tools the suite drives (git, gh) must never prompt or read the developer's config.
os.environ.setdefault("GIT_TERMINAL_PROMPT", "0")
os.environ.setdefault("GH_PROMPT_DISABLED", "1")

# Fixtures every directory may ask for by name (the checkout as other users see it).
pytest_plugins = ["tests.fakes.checkout", "tests.fakes.agent_daemon"]

_REPO = Path(__file__).resolve().parents[1]
_TOP_LEVEL = frozenset({"daemon", "proxy", "client"})


class _TopLevelImportGuard(importlib.abc.MetaPathFinder):
    """Refuse ``import daemon`` (etc.) resolving to this repository's folders.

    pytest puts the repository root on ``sys.path``, and ``airlock/`` links to
    ``daemon/``, ``proxy/`` and ``client/``; without this guard ``daemon.errors``
    imports fine as a second copy of ``airlock.daemon.errors`` whose classes
    never match the real ones.
    """

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        top = fullname.split(".", 1)[0]
        if top not in _TOP_LEVEL or top in sys.modules:
            return None
        spec = importlib.machinery.PathFinder.find_spec(top)
        origin = Path(spec.origin).resolve() if spec and spec.origin else None
        if origin is not None and _REPO in origin.parents:
            raise ImportError(
                f"import airlock.{fullname}, not {fullname} (two copies of one module)"
            )
        return None


sys.meta_path.insert(0, _TopLevelImportGuard())
