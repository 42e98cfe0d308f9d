"""OpenAPI 3.1 for the daemon, generated from the protocol models.

Every route is listed (``/metrics`` and this document included) with every
status it can answer: each route but ``/v1/health`` answers 401 without a
valid token; a tool call answers any of the envelope statuses. The suite
fuzzes this document against a running daemon (tests/daemon/test_openapi_fuzz.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from airlock.daemon.protocol import (
    TOOL_SPECS,
    ErrorEnvelope,
    ExecEvent,
    ExecInput,
    HealthOutput,
    ToolCatalog,
)

_REF_TEMPLATE = "#/components/schemas/{model}"


def _schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    schema = TypeAdapter(tp).json_schema(ref_template=_REF_TEMPLATE)
    defs.update(schema.pop("$defs", {}))
    return schema


def openapi_document(version: str) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    error = _schema(ErrorEnvelope, defs)
    error_responses = {
        str(status): {"description": desc, "content": {"application/json": {"schema": error}}}
        for status, desc in (
            (400, "invalid input"),
            (401, "missing or wrong token"),
            (403, "scope, path escape or generated file"),
            (404, "not found"),
            (409, "conflict with the file's current content"),
            (413, "too large"),
            (415, "binary file"),
            (500, "internal error"),
            (504, "timeout"),
        )
    }
    unauthorized = {"401": error_responses["401"]}
    paths: dict[str, Any] = {
        "/v1/health": {
            "get": {
                "operationId": "health",
                "summary": "Liveness, version, workspace and engines (no token needed).",
                "security": [{}],
                "responses": {
                    "200": {
                        "description": "daemon is up",
                        "content": {"application/json": {"schema": _schema(HealthOutput, defs)}},
                    }
                },
            }
        },
        "/v1/tools": {
            "get": {
                "operationId": "tools",
                "responses": {
                    "200": {
                        "description": "the tool catalogue",
                        "content": {"application/json": {"schema": _schema(ToolCatalog, defs)}},
                    },
                    **unauthorized,
                },
            }
        },
        "/v1/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document.",
                "responses": {
                    "200": {
                        "description": "OpenAPI 3.1",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    **unauthorized,
                },
            }
        },
        "/metrics": {
            "get": {
                "operationId": "metrics",
                "summary": "Prometheus metrics.",
                "responses": {
                    "200": {
                        "description": "Prometheus text",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    **unauthorized,
                },
            }
        },
    }
    for spec in TOOL_SPECS:
        paths[f"/v1/tools/{spec.name}"] = {
            "post": {
                "operationId": spec.name,
                "summary": spec.description,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _schema(spec.input_model, defs)}},
                },
                "responses": {
                    "200": {
                        "description": "the tool's output",
                        "content": {
                            "application/json": {"schema": _schema(spec.output_type, defs)}
                        },
                    },
                    **error_responses,
                },
            }
        }
    paths["/v1/exec/stream"] = {
        "post": {
            "operationId": "exec_stream",
            "summary": "exec's input; its events as they happen, one JSON object a line.",
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _schema(ExecInput, defs)}},
            },
            "responses": {
                "200": {
                    "description": "started, stdout/stderr chunks, then exit (NDJSON)",
                    "content": {"application/x-ndjson": {"schema": _schema(ExecEvent, defs)}},
                },
                **error_responses,
            },
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "airlockd", "version": version},
        "paths": paths,
        "components": {
            "schemas": defs,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }
