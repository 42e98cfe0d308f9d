"""What the transfer routes share: where a path lands, the route-only statuses, a hash cache.

Paths resolve like every tool's: ``path`` alone as a tool's ``path``; with
``root=R``, ``R`` resolves first and ``path`` must stay inside it (as
``apply_patch``'s ``root``), so a symlink inside ``R`` cannot lead elsewhere.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict

from aiohttp import web

from ..auth import Scope
from ..context import ToolContext
from ..errors import Forbidden, InvalidRequest, PathEscape, StaleWrite
from ..paths import Intent, ResolvedPath

HASH_CHUNK = 1 << 20


def query_path(request: web.Request) -> tuple[str, str | None]:
    """``path`` (required) and ``root`` from the query string."""
    path = request.query.get("path")
    if not path:
        raise InvalidRequest(
            f"{request.method} {request.path} needs ?path=PATH (relative to the workspace, or "
            "absolute inside it); add it and call again"
        )
    return path, request.query.get("root")


def resolve_target(
    ctx: ToolContext, path: str, root: str | None, intent: Intent, *, generated: bool = True
) -> ResolvedPath:
    """``generated=False`` skips the generated-file guard (a tree upload may hold ``.git``)."""
    check = None if generated else False
    if root is None:
        return ctx.roots.resolve(path, intent=intent, check_generated=check)
    base = ctx.resolve(root, intent="read")
    joined = path if path.startswith("/") else os.path.join(str(base.real), path)
    resolved = ctx.roots.resolve(joined, intent=intent, check_generated=check)
    if not resolved.real.is_relative_to(base.real):
        raise PathEscape(
            f"{path!r} resolves to {resolved.real}, outside root {base.display}; use a path "
            "inside the root",
            {"path": path, "root": base.display},
        )
    return resolved


def need_write(scope: Scope, what: str) -> None:
    if scope == "read":
        raise Forbidden(
            f"{what} changes the sandbox and this token has read scope only; ask the "
            "orchestrator for a write token",
            {"route": what},
        )


class PreconditionFailed(StaleWrite):
    """``stale_write`` answered with HTTP's own 412, as ``If-Match`` clients expect."""

    @property
    def status(self) -> int:
        return 412


class RangeNotSatisfiable(InvalidRequest):
    """``invalid_request`` answered with 416 (a ``Range`` outside the file)."""

    @property
    def status(self) -> int:
        return 416


def parse_if_match(request: web.Request) -> str | None:
    """The sha256 in ``If-Match: "<sha256>"``, lower-cased; None without the header."""
    raw = request.headers.get("If-Match")
    if raw is None:
        return None
    value = raw.strip()
    if value.startswith("W/"):
        value = value[2:]
    value = value.strip('"').lower()
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise InvalidRequest(
            f"If-Match {raw[:100]!r} is not a quoted sha256 (the ETag a GET returned); send "
            'If-Match: "<64 hex digits>"',
            {"header": "If-Match"},
        )
    return value


class _HashCache:
    """sha256 of files by inode identity, so a second GET (or an ETag check) reads once.

    The key includes size, mtime and ctime in nanoseconds: any write changes
    ctime, and the atomic writer makes a new inode, so a stale hit needs a
    writer that restores both times, which only root can do.
    """

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._data: OrderedDict[tuple[int, ...], str] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(st: os.stat_result) -> tuple[int, ...]:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def get(self, st: os.stat_result) -> str | None:
        with self._lock:
            key = self.key(st)
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, st: os.stat_result, digest: str) -> None:
        with self._lock:
            self._data[self.key(st)] = digest
            while len(self._data) > self._size:
                self._data.popitem(last=False)


HASHES = _HashCache()


def fd_sha256(fd: int, st: os.stat_result) -> str:
    """The sha256 of the open regular file (from offset 0, by ``pread``: the fd's offset stays)."""
    cached = HASHES.get(st)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    offset = 0
    while chunk := os.pread(fd, HASH_CHUNK, offset):
        digest.update(chunk)
        offset += len(chunk)
    value = digest.hexdigest()
    if os.fstat(fd).st_ctime_ns == st.st_ctime_ns:
        HASHES.put(st, value)
    return value
