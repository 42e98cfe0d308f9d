"""File transfer for orchestrators: one file (``/v1/files``) or a tree (``/v1/archive``), streamed.

Routes of the daemon like the tools, not tools: a model never moves hundreds of
megabytes, an orchestrator does. Each entry of :data:`ROUTES` is
``(method, path, metrics label, handler)``; the server wraps every handler with
the token check and the metrics (see ``airlock.daemon.server``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from ..auth import Scope
from ..workspace import Workspace
from .archive import get_archive, put_archive
from .files import get_file, put_file

RouteHandler = Callable[[web.Request, Workspace, Scope], Awaitable[web.StreamResponse]]

ROUTES: tuple[tuple[str, str, str, RouteHandler], ...] = (
    ("GET", "/v1/files", "files_get", get_file),
    ("PUT", "/v1/files", "files_put", put_file),
    ("GET", "/v1/archive", "archive_get", get_archive),
    ("PUT", "/v1/archive", "archive_put", put_archive),
)
