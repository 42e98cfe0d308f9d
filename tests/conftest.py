"""Suite-wide settings: nothing here but what every test directory needs."""

from __future__ import annotations

import os

# Tools the suite drives (git, gh) must never prompt or read the developer's config.
os.environ.setdefault("GIT_TERMINAL_PROMPT", "0")
os.environ.setdefault("GH_PROMPT_DISABLED", "1")
