"""LLM and MCP tool definitions: airlockd's catalog plus the GitHub shell tool, ready for a model.

An orchestrator fetches ``GET /v1/tools`` (``DaemonClient.tools()``), and hands
one of these to a model as is:

- :func:`openai_tools` → Chat Completions ``[{"type": "function", "function": {...}}]``;
  with ``strict=True`` the parameters follow OpenAI's strict-mode subset
  (every property required, optional ones nullable, ``additionalProperties:
  false``, no ``default``/``minLength``/... keywords: limits and defaults are
  moved into the description; maps become ``[{name, value}]`` arrays);
- :func:`openai_responses_tools` → the Responses API's flat ``{"type": "function", name, ...}``;
- :func:`anthropic_tools` → ``[{"name", "description", "input_schema"}]`` (Messages API);
- :func:`mcp_tools` → ``mcp.types.Tool`` with annotations from the catalogue.

Every definition is built from the tool's ``model_input_schema``: the fields
only an orchestrator may set (``granted_paths``) are never offered to a model.
When the model answers, pass its arguments through :func:`model_arguments`
(or call ``DaemonClient.call_model``): it refuses orchestrator-only fields,
drops the nulls strict mode makes a model send for omitted options, and turns
``[{name, value}]`` arrays back into objects.

Schemas are self-contained (``$ref`` into ``$defs`` inlined, since some model
APIs do not resolve references), their root is always ``type: object``, and a
root union is refused rather than silently passed on.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from airlock.daemon.protocol import ORCHESTRATOR_ONLY_FIELDS, TOOLS_BY_NAME, model_schema

from .errors import InvalidRequest
from .github.models import DESCRIPTION, TOOL_NAME, input_schema

if TYPE_CHECKING:
    from mcp import types as mcp_types

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MAX_INLINE_DEPTH = 32

ToolLike = Mapping[str, Any] | BaseModel
Catalog = Iterable[ToolLike] | Mapping[str, Any]

# OpenAI strict mode: the keywords a schema node may carry (the documented subset,
# minus the numeric/array limits that some model snapshots still reject: those go
# into the description instead, where every model reads them).
STRICT_KEYWORDS: frozenset[str] = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "anyOf",
        "description",
    }
)
_FOLDED = (
    ("default", "default {}"),
    ("minimum", "minimum {}"),
    ("maximum", "maximum {}"),
    ("exclusiveMinimum", "greater than {}"),
    ("exclusiveMaximum", "less than {}"),
    ("minLength", "length at least {}"),
    ("maxLength", "length at most {}"),
    ("minItems", "at least {} items"),
    ("maxItems", "at most {} items"),
    ("pattern", "matching /{}/"),
    ("format", "format {}"),
)
PAIR_NOTE = "Given as a list of {name, value} pairs."


class ToolDefinitionError(ValueError):
    """A tool cannot be offered to a model as is (bad name, non-object root schema)."""


def github_shell_tool() -> dict[str, Any]:
    """The GitHub shell tool in airlockd's catalog shape."""
    schema = input_schema()
    return {
        "name": TOOL_NAME,
        "description": DESCRIPTION,
        "input_schema": schema,
        "model_input_schema": model_schema(schema),
        "read_only": False,
        "supports_parallel": False,
        "destructive": True,
        "idempotent": False,
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
    """A self-contained object-root copy of ``schema`` (``$defs`` inlined, no titles)."""
    defs = schema.get("$defs") or {}
    out = _inline(copy.deepcopy(dict(schema)), defs, 0)
    assert isinstance(out, dict)
    _drop_titles(out)
    if any(key in out for key in ("anyOf", "oneOf", "allOf")) and "properties" not in out:
        raise ToolDefinitionError("the root of a tool schema must be an object, not a union")
    if out.get("type", "object") != "object":
        raise ToolDefinitionError(
            f"the root of a tool schema must be an object, not {out['type']!r}"
        )
    out["type"] = "object"
    out.setdefault("properties", {})
    return out


def _drop_titles(node: Any) -> None:
    if isinstance(node, dict):
        node.pop("title", None)
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for sub in value.values():
                    _drop_titles(sub)
            else:
                _drop_titles(value)
    elif isinstance(node, list):
        for item in node:
            _drop_titles(item)


def _as_dict(tool: ToolLike) -> dict[str, Any]:
    data = tool.model_dump() if isinstance(tool, BaseModel) else dict(tool)
    name = data.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ToolDefinitionError(f"tool name {name!r} is not usable by model APIs")
    return data


def model_facing_schema(tool: Mapping[str, Any]) -> dict[str, Any]:
    """The normalized schema a model is given: ``model_input_schema`` (or the input
    schema with orchestrator-only fields removed, for catalogues that predate it)."""
    raw = tool.get("model_input_schema") or model_schema(dict(tool["input_schema"]))
    out = normalize_schema(raw)
    for name in ORCHESTRATOR_ONLY_FIELDS:  # belt and braces: never offered to a model
        out["properties"].pop(name, None)
        if name in out.get("required", []):
            out["required"] = [r for r in out["required"] if r != name]
    return out


def collect(
    catalog: Catalog,
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


# ---------------------------------------------------------------- strict mode


def _is_map(node: Mapping[str, Any]) -> bool:
    return (
        node.get("type") == "object"
        and not node.get("properties")
        and isinstance(node.get("additionalProperties"), Mapping)
    )


def pair_array(value: dict[str, Any]) -> dict[str, Any]:
    """A map's model-facing shape: an array of ``{name, value}`` (``value`` the map's
    value schema); :func:`model_arguments` turns it back into the object."""
    value["description"] = value.get("description") or "The value."
    return {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The name (key)."},
                "value": value,
            },
            "required": ["name", "value"],
            "additionalProperties": False,
        },
    }


def _fold(node: Mapping[str, Any]) -> str:
    notes = []
    for key, text in _FOLDED:
        if key in node:
            value = node[key]
            notes.append(text.format(json.dumps(value) if key == "default" else value))
    description = str(node.get("description", "")).strip()
    if notes:
        suffix = "(" + "; ".join(notes) + ")"
        description = f"{description} {suffix}".strip()
    return description


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    if "anyOf" in node:
        if not any(branch.get("type") == "null" for branch in node["anyOf"]):
            node["anyOf"].append({"type": "null"})
        return node
    kind = node.get("type")
    if isinstance(kind, list):
        if "null" not in kind:
            node["type"] = [*kind, "null"]
    elif isinstance(kind, str) and kind != "null":
        node["type"] = [kind, "null"]
    if "enum" in node and None not in node["enum"]:
        node["enum"] = [*node["enum"], None]
    return node


def _strict(node: Mapping[str, Any]) -> dict[str, Any]:
    description = _fold(node)
    if "anyOf" in node:
        branches = [_strict(b) for b in node["anyOf"]]
        non_null = [b for b in branches if b.get("type") != "null"]
        if len(non_null) == 1 and len(branches) == 2 and isinstance(non_null[0].get("type"), str):
            out = _nullable(non_null[0])  # X | None: one nullable type, simplest for models
        else:
            out = {"anyOf": branches}
    elif _is_map(node):
        out = pair_array(_strict(node["additionalProperties"]))
        description = f"{description} {PAIR_NOTE}".strip()
    elif node.get("type") == "object":
        props = node.get("properties", {})
        required = set(node.get("required", []))
        out_props = {}
        for name, sub in props.items():
            converted = _strict(sub)
            out_props[name] = converted if name in required else _nullable(converted)
        out = {
            "type": "object",
            "properties": out_props,
            "required": list(props),
            "additionalProperties": False,
        }
    elif node.get("type") == "array":
        out = {"type": "array"}
        if "items" in node:
            out["items"] = _strict(node["items"])
    else:
        out = {k: copy.deepcopy(node[k]) for k in ("type", "enum") if k in node}
    if description:
        out["description"] = description
    return out


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI strict-mode copy of a normalized object schema."""
    return _strict(normalize_schema(schema))


# ---------------------------------------------------------------- definitions


def openai_tools(catalog: Catalog, *, strict: bool = False, **options: Any) -> list[dict[str, Any]]:
    """OpenAI Chat Completions function definitions (``strict=True`` for strict mode)."""
    out = []
    for tool in collect(catalog, **options):
        schema = model_facing_schema(tool)
        function: dict[str, Any] = {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "parameters": _strict(schema) if strict else schema,
        }
        if strict:
            function["strict"] = True
        out.append({"type": "function", "function": function})
    return out


def openai_responses_tools(
    catalog: Catalog, *, strict: bool = True, **options: Any
) -> list[dict[str, Any]]:
    """OpenAI Responses API function tools (flat shape; strict by default, as that API is)."""
    return [
        {"type": "function", **tool["function"], "strict": strict}
        for tool in openai_tools(catalog, strict=strict, **options)
    ]


def anthropic_tools(catalog: Catalog, **options: Any) -> list[dict[str, Any]]:
    """Anthropic Messages API tool definitions."""
    return [
        {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "input_schema": model_facing_schema(tool),
        }
        for tool in collect(catalog, **options)
    ]


def mcp_tools(catalog: Catalog, **options: Any) -> list[mcp_types.Tool]:
    """MCP tools (needs the ``mcp`` extra), annotated from the catalogue's flags."""
    from mcp import types

    out = []
    for tool in collect(catalog, **options):
        read_only = bool(tool.get("read_only", False))
        out.append(
            types.Tool(
                name=tool["name"],
                description=tool.get("description", ""),
                inputSchema=model_facing_schema(tool),
                annotations=types.ToolAnnotations(
                    title=tool["name"].replace("_", " "),
                    readOnlyHint=read_only,
                    destructiveHint=bool(tool.get("destructive", not read_only)),
                    idempotentHint=bool(tool.get("idempotent", read_only)),
                    openWorldHint=tool["name"] == TOOL_NAME,
                ),
            )
        )
    return out


# ---------------------------------------------------------------- the way back


def _tool_schema(
    name: str, schema: Mapping[str, Any] | None, normalized: bool
) -> Mapping[str, Any]:
    if schema is not None:
        return schema if normalized else normalize_schema(schema)
    spec = TOOLS_BY_NAME.get(name)
    if spec is not None:
        return normalize_schema(spec.input_schema())
    if name == TOOL_NAME:
        return normalize_schema(input_schema())
    raise InvalidRequest(
        f"there is no tool named {name!r}; use one of the tools you were given",
        {"tools": sorted([*TOOLS_BY_NAME, TOOL_NAME])},
    )


def _back(node: Mapping[str, Any], value: Any) -> Any:
    if isinstance(value, list) and _is_map(node):
        if all(isinstance(p, Mapping) and set(p) == {"name", "value"} for p in value):
            return {str(p["name"]): _back(node["additionalProperties"], p["value"]) for p in value}
        return value
    branches = node.get("anyOf")
    if branches:
        for branch in branches:
            if branch.get("type") != "null" and (
                _is_map(branch) or branch.get("type") in ("object", "array")
            ):
                return _back(branch, value)
        return value
    if isinstance(value, Mapping) and node.get("type") == "object":
        props = node.get("properties", {})
        required = set(node.get("required", []))
        out = {}
        for key, item in value.items():
            if item is None and key in props and key not in required:
                continue  # strict mode's "not given": the daemon applies the default
            out[key] = _back(props[key], item) if key in props else item
        return out
    if isinstance(value, list) and isinstance(node.get("items"), Mapping):
        return [_back(node["items"], item) for item in value]
    return value


def model_arguments(
    name: str,
    arguments: Mapping[str, Any] | str,
    *,
    schema: Mapping[str, Any] | None = None,
    normalized: bool = False,
) -> dict[str, Any]:
    """A model's tool-call arguments turned into the tool's input.

    Raises :class:`~airlock.client.errors.InvalidRequest` (a ``ClientError``) for
    arguments that are not a JSON object and for orchestrator-only fields: a model
    can never set ``granted_paths``, whatever the definitions it was given.
    """
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            raise InvalidRequest(
                f"the arguments for {name} are not valid JSON; send a JSON object"
            ) from None
    if not isinstance(arguments, Mapping):
        raise InvalidRequest(f"the arguments for {name} must be a JSON object")
    forbidden = sorted(ORCHESTRATOR_ONLY_FIELDS & set(arguments))
    if forbidden:
        raise InvalidRequest(
            f"{', '.join(forbidden)} cannot be set by a model; call {name} without it "
            "(paths outside the workspace are granted by the orchestrator, not the tool call)",
            {"fields": forbidden},
        )
    result = _back(_tool_schema(name, schema, normalized), arguments)
    assert isinstance(result, dict)
    return result
