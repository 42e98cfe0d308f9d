"""LLM tool definitions from the real airlockd catalog plus the GitHub shell tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airlock.client.github.models import GitHubShellInput
from airlock.client.github.shell import GitHubShell
from airlock.client.tools import (
    ToolDefinitionError,
    anthropic_tools,
    github_shell_tool,
    normalize_schema,
    openai_tools,
)
from tests.fakes.daemon_harness import running_daemon
from tests.fakes.jsonwalk import json_nodes


def _check_schema(schema: dict[str, Any]) -> None:
    assert schema["type"] == "object"
    assert "anyOf" not in schema and "oneOf" not in schema
    for node in json_nodes(schema):
        if not isinstance(node, dict):
            continue
        assert "$ref" not in node and "$defs" not in node and "const" not in node


async def test_definitions_from_the_daemon_catalog(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with running_daemon(workspace) as daemon, daemon.client() as client:
        catalog = await client.tools()
    daemon_names = {t.name for t in catalog}
    assert {"file_read", "exec"} <= daemon_names

    openai = openai_tools(catalog)
    names = [t["function"]["name"] for t in openai]
    assert set(names) == daemon_names | {"github_shell"}
    for tool in openai:
        assert tool["type"] == "function"
        assert tool["function"]["description"]
        _check_schema(tool["function"]["parameters"])
    json.dumps(openai)  # serialisable as is

    anthropic = anthropic_tools(catalog)
    assert [t["name"] for t in anthropic] == names
    for tool in anthropic:
        assert set(tool) == {"name", "description", "input_schema"}
        _check_schema(tool["input_schema"])

    read_only = anthropic_tools(
        {"tools": [t.model_dump() for t in catalog]},
        github_shell=False,
        include=[t.name for t in catalog if t.read_only],
    )
    assert "exec" not in [t["name"] for t in read_only]
    assert "github_shell" not in [t["name"] for t in read_only]


def test_github_shell_schema_matches_the_model() -> None:
    schema = normalize_schema(github_shell_tool()["input_schema"])
    _check_schema(schema)
    assert set(schema["required"]) == {"command", "permissions", "description"}
    perm = schema["properties"]["permissions"]
    assert perm["minItems"] == perm["maxItems"] == 1
    assert perm["items"]["properties"]["access"]["enum"] == ["write"]
    assert perm["items"]["properties"]["provider"]["enum"] == ["github"]
    assert schema["properties"]["command"]["maxLength"] == 20000
    assert GitHubShell.input_schema() == github_shell_tool()["input_schema"]
    GitHubShellInput.model_validate(
        {
            "command": "gh pr view 1",
            "permissions": [{"provider": "github", "repositories": ["o/r"], "access": "write"}],
            "description": "d",
        }
    )
    assert "gh-signed-commit" in github_shell_tool()["description"]


def test_bad_tools_are_refused() -> None:
    with pytest.raises(ToolDefinitionError):
        openai_tools([{"name": "bad name!", "description": "", "input_schema": {}}])
    with pytest.raises(ToolDefinitionError):
        anthropic_tools(
            [{"name": "u", "description": "", "input_schema": {"anyOf": [{"type": "string"}]}}]
        )
    with pytest.raises(ToolDefinitionError):
        openai_tools([{"name": "s", "description": "", "input_schema": {"type": "string"}}])
    dup = {"name": "x", "description": "", "input_schema": {"type": "object"}}
    with pytest.raises(ToolDefinitionError):
        openai_tools([dup, dup])


def test_refs_are_inlined() -> None:
    schema = {
        "type": "object",
        "title": "Root",
        "properties": {"edit": {"$ref": "#/$defs/Edit", "description": "one edit"}},
        "$defs": {"Edit": {"type": "object", "properties": {"path": {"type": "string"}}}},
    }
    out = normalize_schema(schema)
    assert out["properties"]["edit"] == {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "description": "one edit",
    }
    assert "title" not in out and "$defs" not in out
