"""What the pod simulations share: a pod's directories as local ones, for its non-root user."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass
class LocalPod:
    """A pod simulated on this machine: its volumes are directories under ``base``."""

    base: Path
    uid: int
    paths: dict[str, str]  # pod path -> local directory
    repo: Path  # the checkout, traversable by the pod user

    def map(self, text: str) -> str:
        """Rewrite every pod path in ``text`` to its local directory, exactly once."""
        pattern = "|".join(re.escape(p) for p in sorted(self.paths, key=len, reverse=True))
        return re.sub(rf"(?<![\w/.-])({pattern})(?=/|\b|$)", lambda m: self.paths[m[1]], text)
