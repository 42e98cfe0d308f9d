"""TOOL_SPECS is the one tool list: the server, Workspace, the clients (async and sync),
the LLM definitions and MCP are derived from it, and this checks each against it."""

from __future__ import annotations

import inspect
import typing
from typing import Any

from airlock.client import codegen
from airlock.client.daemon import DaemonClient
from airlock.client.sync import DaemonClient as SyncDaemonClient
from airlock.client.tools import anthropic_tools, mcp_tools, openai_tools
from airlock.daemon.protocol import TOOL_SPECS, TOOLS_BY_NAME, ToolCatalog
from airlock.daemon.workspace import Workspace


def _same_type(a: Any, b: Any) -> bool:
    if typing.get_origin(b) is typing.Annotated:
        b = typing.get_args(b)[0]
    return set(typing.get_args(a) or [a]) == set(typing.get_args(b) or [b])


def test_names_are_unique() -> None:
    assert len(TOOLS_BY_NAME) == len(TOOL_SPECS)


def test_workspace_has_one_typed_handler_per_spec() -> None:
    for spec in TOOL_SPECS:
        method = getattr(Workspace, spec.name)
        hints = typing.get_type_hints(method)
        assert hints["req"] is spec.input_model, spec.name
        assert _same_type(hints["return"], spec.output_type), spec.name


def test_the_generated_client_methods_are_fresh() -> None:
    assert codegen.TARGET.read_text() == codegen.generate(), (
        "client/_methods.py is stale: run python -m airlock.client.codegen"
    )


def test_both_clients_have_a_keyword_typed_documented_method_per_spec() -> None:
    for cls in (DaemonClient, SyncDaemonClient):
        for spec in TOOL_SPECS:
            method = getattr(cls, spec.name)
            assert method.__doc__ and spec.description.split()[0] in method.__doc__
            for name in spec.input_model.model_fields:
                assert name in method.__doc__, (cls, spec.name, name)
            overloads = typing.get_overloads(method)
            keyword = inspect.signature(overloads[-1]).parameters
            assert set(keyword) - {"self"} == set(spec.input_model.model_fields)
            for name, field in spec.input_model.model_fields.items():
                param = keyword[name]
                assert param.kind is inspect.Parameter.KEYWORD_ONLY
                assert (param.default is inspect.Parameter.empty) == field.is_required()


def test_definitions_and_catalog_cover_every_spec() -> None:
    catalog = ToolCatalog(tools=[s.info() for s in TOOL_SPECS]).tools
    names = {s.name for s in TOOL_SPECS}
    assert {t["function"]["name"] for t in openai_tools(catalog, github_shell=False)} == names
    assert {t["name"] for t in anthropic_tools(catalog, github_shell=False)} == names
    assert {t.name for t in mcp_tools(catalog, github_shell=False)} == names
