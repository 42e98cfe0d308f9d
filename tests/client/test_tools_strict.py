"""Model-facing definitions: strict-mode validity, SDK typed params, no granted_paths,
a description on every property, and the way back from a model's arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic.types import ToolParam
from openai.types.chat import ChatCompletionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter

from airlock.client.errors import ClientError, InvalidRequest
from airlock.client.tools import (
    STRICT_KEYWORDS,
    anthropic_tools,
    mcp_tools,
    model_arguments,
    openai_responses_tools,
    openai_tools,
)
from airlock.daemon.protocol import TOOL_SPECS, ExecInput, FileSearchInput, PatchEdit
from tests.fakes.jsonwalk import json_nodes

CATALOG = [spec.info() for spec in TOOL_SPECS]

# OpenAI's documented strict-mode rules (Structured Outputs, "Supported schemas"):
# root an object (not anyOf); every object lists all its properties in required and has
# additionalProperties false; types from the JSON-schema core set; at most 5000 object
# properties and 10 levels of nesting; at most 1000 enum values. airlock keeps to a
# narrower keyword set still (STRICT_KEYWORDS), with no default/minLength/maxLength/pattern.
STRICT_TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}
UNSUPPORTED = {"default", "minLength", "maxLength", "pattern", "format", "minItems", "maxItems",
               "minimum", "maximum", "title", "$ref", "$defs", "const", "oneOf", "allOf",
               "patternProperties", "uniqueItems", "minProperties", "maxProperties"}  # fmt: skip


def strict_problems(schema: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    counts = {"properties": 0, "enum": 0}

    def visit(node: dict[str, Any], where: str, depth: int, is_property: bool) -> None:
        if depth > 10:
            problems.append(f"{where}: nested deeper than 10 levels")
        for key in node:
            if key not in STRICT_KEYWORDS:
                problems.append(f"{where}: keyword {key!r} is not in the strict subset")
            if key in UNSUPPORTED:
                problems.append(f"{where}: unsupported keyword {key!r}")
        if is_property and not node.get("description"):
            problems.append(f"{where}: no description")
        kinds = node.get("type")
        for kind in kinds if isinstance(kinds, list) else [kinds] if kinds else []:
            if kind not in STRICT_TYPES:
                problems.append(f"{where}: type {kind!r}")
        if "enum" in node:
            counts["enum"] += len(node["enum"])
            if isinstance(kinds, list) and "null" in kinds and None not in node["enum"]:
                problems.append(f"{where}: nullable enum without null")
        if "type" not in node and "anyOf" not in node and "enum" not in node:
            problems.append(f"{where}: no type")
        if kinds == "object" or (isinstance(kinds, list) and "object" in kinds):
            props = node.get("properties")
            if not isinstance(props, dict):
                problems.append(f"{where}: object without properties")
                props = {}
            if node.get("additionalProperties") is not False:
                problems.append(f"{where}: additionalProperties is not false")
            if sorted(node.get("required", [])) != sorted(props):
                problems.append(f"{where}: not every property is required")
            counts["properties"] += len(props)
            for name, sub in props.items():
                visit(sub, f"{where}.{name}", depth + 1, True)
        if "items" in node:
            visit(node["items"], f"{where}[]", depth + 1, False)
        for i, branch in enumerate(node.get("anyOf", [])):
            visit(branch, f"{where}|{i}", depth, False)

    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("root: must be type object, not a union")
    visit(schema, "root", 1, False)
    if counts["properties"] > 5000:
        problems.append("more than 5000 properties")
    if counts["enum"] > 1000:
        problems.append("more than 1000 enum values")
    return problems


def test_every_tool_is_valid_in_openai_strict_mode() -> None:
    tools = openai_tools(CATALOG, strict=True)
    assert {t["function"]["name"] for t in tools} == {s.name for s in TOOL_SPECS} | {"github_shell"}
    report = {t["function"]["name"]: strict_problems(t["function"]["parameters"]) for t in tools}
    assert report == {name: [] for name in report}
    for tool in tools:
        assert tool["function"]["strict"] is True


def test_the_checker_catches_what_strict_mode_rejects() -> None:
    loose = openai_tools(CATALOG, strict=False)
    assert any(strict_problems(t["function"]["parameters"]) for t in loose)
    bad = {"type": "object", "properties": {"a": {"type": "string", "default": "x"}}}
    assert len(strict_problems(bad)) >= 3  # default, no description, required, additionalProperties


def test_the_sdks_typed_params_accept_the_definitions() -> None:
    for typed, definitions in (
        (ChatCompletionToolParam, openai_tools(CATALOG, strict=True)),
        (ChatCompletionToolParam, openai_tools(CATALOG)),
        (FunctionToolParam, openai_responses_tools(CATALOG)),
        (ToolParam, anthropic_tools(CATALOG)),
    ):
        adapter: TypeAdapter[Any] = TypeAdapter(typed)
        for definition in definitions:
            # Equal after validation: nothing unknown was dropped, nothing was coerced.
            assert adapter.validate_python(definition) == definition


def test_no_model_definition_offers_granted_paths() -> None:
    assert all("granted_paths" in s.input_schema()["properties"] for s in TOOL_SPECS)
    for info in CATALOG:
        assert "granted_paths" not in json.dumps(info.model_input_schema)
    every = [
        openai_tools(CATALOG),
        openai_tools(CATALOG, strict=True),
        openai_responses_tools(CATALOG),
        anthropic_tools(CATALOG),
        [t.model_dump(mode="json") for t in mcp_tools(CATALOG)],
    ]
    assert "granted_paths" not in json.dumps(every)


def test_every_property_of_every_schema_has_a_description() -> None:
    missing = []
    for tool in anthropic_tools(CATALOG):
        for node in json_nodes(tool["input_schema"]):
            if isinstance(node, dict) and isinstance(node.get("properties"), dict):
                for name, sub in node["properties"].items():
                    if not sub.get("description"):
                        missing.append(f"{tool['name']}.{name}")
    for spec in TOOL_SPECS:  # the full schema too (granted_paths included)
        for name, field in spec.input_model.model_fields.items():
            if not field.description:
                missing.append(f"{spec.name}.{name} (input)")
    for name, field in PatchEdit.model_fields.items():
        if not field.description:
            missing.append(f"PatchEdit.{name}")
    assert missing == []


def test_limits_and_defaults_move_into_the_description() -> None:
    params = {
        t["function"]["name"]: t["function"]["parameters"]
        for t in openai_tools(CATALOG, strict=True)
    }
    limit = params["file_read"]["properties"]["limit"]
    assert limit["type"] == ["integer", "null"]
    assert "default 2000" in limit["description"] and "maximum 100000" in limit["description"]
    env = params["exec"]["properties"]["env"]
    assert env["type"] == ["array", "null"]
    assert env["items"]["required"] == ["name", "value"]


def test_strict_arguments_come_back_as_the_tools_input() -> None:
    # What a strict-mode model sends: every key, nulls for what it leaves alone, env as pairs.
    sent = {
        "argv": ["env"], "cwd": None, "env": [{"name": "A", "value": "1"}], "stdin": None,
        "timeout_s": None, "max_output_bytes": None, "keep": None,
    }  # fmt: skip
    args = model_arguments("exec", json.dumps(sent))
    assert args == {"argv": ["env"], "env": {"A": "1"}}
    assert ExecInput.model_validate(args).env == {"A": "1"}
    search = model_arguments("file_search", {"pattern": "x", "glob": None, "fixed_strings": None})
    assert FileSearchInput.model_validate(search).glob is None
    edits = model_arguments(
        "file_multi_patch",
        {"edits": [{"path": "a", "old_string": "x", "new_string": "y", "replace_all": None}],
         "diagnostics": None},
    )  # fmt: skip
    assert edits == {"edits": [{"path": "a", "old_string": "x", "new_string": "y"}]}


def test_a_model_can_never_set_granted_paths() -> None:
    for spec in TOOL_SPECS:
        with pytest.raises(InvalidRequest) as info:
            model_arguments(spec.name, {"granted_paths": ["/"]})
        assert "granted_paths" in info.value.message
        assert isinstance(info.value, ClientError)
    with pytest.raises(InvalidRequest):
        model_arguments("file_read", "{not json")
    with pytest.raises(InvalidRequest):
        model_arguments("nope", {})
