"""LLM tool definitions: airlockd's catalog plus the GitHub shell tool, ready for a model.

An orchestrator fetches ``GET /v1/tools`` (``DaemonClient.tools()``), adds the
GitHub shell tool, and hands the result to a model as is:

- :func:`openai_tools` → ``[{"type": "function", "function": {name, description, parameters}}]``
  (Chat Completions function calling; ``strict`` is left off because optional
  fields with defaults are not expressible in OpenAI's strict subset);
- :func:`anthropic_tools` → ``[{"name", "description", "input_schema"}]`` (Messages API).

Schemas are made self-contained (``$ref`` into ``$defs`` inlined, since some
model APIs do not resolve references), their root is always ``type: object``,
and a root union is refused rather than silently passed on.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from airlock.client.github.models import DESCRIPTION, TOOL_NAME, input_schema

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MAX_INLINE_DEPTH = 32

ToolLike = Mapping[str, Any] | BaseModel


class ToolDefinitionError(ValueError):
    """A tool cannot be offered to a model as is (bad name, non-object root schema)."""


def github_shell_tool() -> dict[str, Any]:
    """The GitHub shell tool in airlockd's catalog shape."""
    return {
        "name": TOOL_NAME,
        "description": DESCRIPTION,
        "input_schema": input_schema(),
        "read_only": False,
        "supports_parallel": False,
    }


def _inline(node: Any, defs: Mapping[str, Any], depth: int) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs, depth) for item in node]
    if not isinstance(node, Mapping):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        if depth >= _MAX_INLINE_DEPTH:
            raise ToolDefinitionError(f"schema reference {ref} is recursive too deeply to inline")
        target = defs.get(ref.removeprefix("#/$defs/"))
        if target is None:
            raise ToolDefinitionError(f"schema reference {ref} has no definition")
        merged = {k: v for k, v in node.items() if k != "$ref"}
        return _inline({**target, **merged}, defs, depth + 1)
    out = {k: _inline(v, defs, depth) for k, v in node.items() if k != "$defs"}
    if "const" in out and "enum" not in out:
        # ``enum`` of one value is understood by every model API; ``const`` is not.
        out["enum"] = [out.pop("const")]
    return out


def normalize_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A self-contained object-root copy of ``schema`` (``$defs`` inlined, no root title)."""
    defs = schema.get("$defs") or {}
    out = _inline(copy.deepcopy(dict(schema)), defs, 0)
    assert isinstance(out, dict)
    out.pop("title", None)
    if any(key in out for key in ("anyOf", "oneOf", "allOf")) and "properties" not in out:
        raise ToolDefinitionError("the root of a tool schema must be an object, not a union")
    if out.get("type", "object") != "object":
        raise ToolDefinitionError(
            f"the root of a tool schema must be an object, not {out['type']!r}"
        )
    out["type"] = "object"
    out.setdefault("properties", {})
    return out


def _as_dict(tool: ToolLike) -> dict[str, Any]:
    data = tool.model_dump() if isinstance(tool, BaseModel) else dict(tool)
    name = data.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ToolDefinitionError(f"tool name {name!r} is not usable by model APIs")
    return data


def collect(
    catalog: Iterable[ToolLike] | Mapping[str, Any],
    *,
    github_shell: bool = True,
    include: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """Catalog entries (``{"tools": [...]}`` or a list) plus the GitHub shell tool, filtered."""
    if isinstance(catalog, Mapping):
        entries: Iterable[ToolLike] = catalog.get("tools", [])
    else:
        entries = catalog
    tools = [_as_dict(t) for t in entries]
    if github_shell and not any(t["name"] == TOOL_NAME for t in tools):
        tools.append(github_shell_tool())
    wanted = set(include) if include is not None else None
    skipped = set(exclude)
    seen: set[str] = set()
    out = []
    for tool in tools:
        if tool["name"] in seen:
            raise ToolDefinitionError(f"tool {tool['name']!r} appears twice")
        seen.add(tool["name"])
        if (wanted is None or tool["name"] in wanted) and tool["name"] not in skipped:
            out.append(tool)
    return out


def openai_tools(
    catalog: Iterable[ToolLike] | Mapping[str, Any], **options: Any
) -> list[dict[str, Any]]:
    """OpenAI function-calling definitions."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "parameters": normalize_schema(tool["input_schema"]),
            },
        }
        for tool in collect(catalog, **options)
    ]


def anthropic_tools(
    catalog: Iterable[ToolLike] | Mapping[str, Any], **options: Any
) -> list[dict[str, Any]]:
    """Anthropic tool-use definitions."""
    return [
        {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "input_schema": normalize_schema(tool["input_schema"]),
        }
        for tool in collect(catalog, **options)
    ]
