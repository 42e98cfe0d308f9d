"""``airlock mcp``: airlockd's tools as an MCP server (stdio or streamable HTTP).

Needs the ``mcp`` extra (``pip install 'airlock[mcp]'``). See docs/mcp.md.
"""

from __future__ import annotations

from .server import AirlockMCP, ExtraTool, ToolCallFailed, load, render
from .transports import serve_http, serve_stdio

__all__ = [
    "AirlockMCP",
    "ExtraTool",
    "ToolCallFailed",
    "load",
    "render",
    "serve_http",
    "serve_stdio",
]
