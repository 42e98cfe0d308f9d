"""Which program searches: decided once, shown in ``/v1/health``.

Order: ``rg`` on PATH, else the rg the ``ripgrep`` wheel installed next to
this interpreter, else POSIX ``grep`` (driven so its answers have the same
shape), else nothing: ``file_search`` then answers with an install hint and
every other tool keeps working.

``AIRLOCK_SEARCH_ENGINE`` (read at resolution) forces a choice:
``auto`` (default), ``rg`` (PATH or wheel only), ``grep`` or ``none``. Tests
use it to exercise the fallback; operators can use it to pin behaviour.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import sysconfig
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ..context import ToolContext

ENV_OVERRIDE = "AIRLOCK_SEARCH_ENGINE"
ENGINE_KEY = "search"
INSTALL_HINT = (
    "no search engine is available in this sandbox: install ripgrep (`apt-get install "
    "ripgrep`, or `pip install 'airlock[daemon]'` which ships the ripgrep wheel) or POSIX "
    "grep, then restart airlockd. Meanwhile use exec with your own command."
)
_PROBE_TIMEOUT_S = 5.0
# --no-require-git arrived in ripgrep 11; older binaries are passed over for the next candidate.
_MIN_RG_MAJOR = 11


@dataclass(frozen=True)
class SearchEngine:
    """The resolved engine; ``pcre``/``null`` are grep capabilities probed at start."""

    engine: Literal["rg", "grep"]
    path: str
    version: str
    source: str
    pcre: bool = False
    null: bool = False

    def health(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_health(cls, data: dict[str, Any]) -> SearchEngine | None:
        if data.get("engine") not in ("rg", "grep"):
            return None
        return cls(
            engine=data["engine"],
            path=str(data["path"]),
            version=str(data.get("version", "")),
            source=str(data.get("source", "")),
            pcre=bool(data.get("pcre", False)),
            null=bool(data.get("null", False)),
        )


async def _run(argv: list[str]) -> tuple[int, str]:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
    except OSError:
        return 127, ""
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), _PROBE_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return 124, ""
    return proc.returncode if proc.returncode is not None else 1, out.decode(errors="replace")


def _wheel_rg() -> Path | None:
    """The rg the ``ripgrep`` wheel put into this interpreter's scripts directory."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(folder) / "rg"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


async def _rg_candidate() -> SearchEngine | None:
    candidates: list[tuple[str, str]] = []
    on_path = shutil.which("rg")
    if on_path:
        candidates.append((on_path, "path"))
    wheel = _wheel_rg()
    if wheel is not None:
        candidates.append((str(wheel), "wheel"))
    for path, source in candidates:
        code, out = await _run([path, "--version"])
        if code == 0 and out.startswith("ripgrep"):
            version = out.split()[1] if len(out.split()) > 1 else "unknown"
            if _major(version) >= _MIN_RG_MAJOR:
                return SearchEngine("rg", path, version, source)
    return None


def _major(version: str) -> int:
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else 0


async def _grep_candidate() -> SearchEngine | None:
    path = shutil.which("grep")
    if path is None:
        return None
    code, out = await _run([path, "--version"])
    first = out.splitlines()[0] if code == 0 and out else "unknown"
    version = first.rsplit(" ", 1)[-1] if "GNU" in first else first
    # Exit 1 is "no match": the option exists. 2 means the option is unsupported.
    pcre = (await _run([path, "-P", "-e", "x", "/dev/null"]))[0] == 1
    null = (await _run([path, "--null", "-l", "-e", "x", "/dev/null"]))[0] == 1
    return SearchEngine("grep", path, version, "path", pcre=pcre, null=null)


async def detect(choice: str) -> SearchEngine | None:
    if choice in ("auto", "rg"):
        found = await _rg_candidate()
        if found is not None or choice == "rg":
            return found
    if choice in ("auto", "grep"):
        return await _grep_candidate()
    return None


async def resolve_engine(ctx: ToolContext) -> SearchEngine | None:
    """The engine for this daemon, resolved on first use (or at start-up) and then kept.

    The decision lives in ``ctx.engines["search"]`` so ``/v1/health`` shows it.
    """
    known = ctx.engines.get(ENGINE_KEY)
    if isinstance(known, dict):
        return SearchEngine.from_health(known)
    choice = os.environ.get(ENV_OVERRIDE, "auto").strip().lower() or "auto"
    if choice not in ("auto", "rg", "grep", "none"):
        choice = "auto"
    engine = await detect(choice)
    if engine is None:
        ctx.engines[ENGINE_KEY] = {"engine": None, "requested": choice, "hint": INSTALL_HINT}
    else:
        ctx.engines[ENGINE_KEY] = {**engine.health(), "requested": choice}
    return engine
