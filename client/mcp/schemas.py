"""The input schemas ``airlock mcp`` serves: strict-convertible, with maps as ``{name, value}`` lists.

MCP hosts that hand tools to OpenAI models in strict mode (the OpenAI Agents
SDK's ``ensure_strict_json_schema``) refuse any object schema whose
``additionalProperties`` is set: a free-form map (``env`` on ``exec`` and
``process_start``) would make the host quietly serve that tool without strict
mode. So every map is served as an array of ``{name, value}`` objects (the
same shape :func:`airlock.client.tools.openai_tools` gives strict models), and
:func:`airlock.client.tools.model_arguments`, which every call goes through,
turns the array back into the object the daemon takes. Everything else is the
model-facing schema unchanged (optional fields stay optional, defaults and
limits stay), so non-strict hosts lose nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..tools import PAIR_NOTE, pair_array


def _is_map(node: Mapping[str, Any]) -> bool:
    extra = node.get("additionalProperties")
    return (
        node.get("type") == "object"
        and not node.get("properties")
        and isinstance(extra, Mapping | bool)
        and extra is not False
    )


def served_schema(node: Any) -> Any:
    """A copy of ``node`` with every map replaced by its ``{name, value}`` array."""
    if isinstance(node, list):
        return [served_schema(item) for item in node]
    if not isinstance(node, Mapping):
        return copy.deepcopy(node)
    if _is_map(node):
        extra = node["additionalProperties"]
        value = served_schema(extra) if isinstance(extra, Mapping) else {}
        out = pair_array(dict(value))
        for key in ("description", "title"):
            if key in node:
                out[key] = node[key]
        out["description"] = f"{out.get('description', '')} {PAIR_NOTE}".strip()
        return out
    return {key: served_schema(value) for key, value in node.items()}
