"""OpenAPI 3.1 for the daemon, generated from the protocol models.

Every route is listed (``/metrics`` and this document included) with every
status it can answer: each route but ``/v1/health`` answers 401 without a
valid token; a tool call answers any of the envelope statuses. The suite
fuzzes this document against a running daemon (tests/daemon/test_openapi_fuzz.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from .protocol import (
    TOOL_SPECS,
    ArchivePutOutput,
    ErrorEnvelope,
    ExecEvent,
    ExecInput,
    FileTransferOutput,
    HealthOutput,
    ToolCatalog,
    WatchEvent,
    WatchInput,
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
    paths.update(_agent_paths(defs, error_responses))
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


def _query(name: str, required: bool, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "schema": {"type": "string"},
        "description": description,
    }


_PATH_PARAMS = [
    _query("path", True, "The file or directory, as a tool's path."),
    _query("root", False, "Resolve path inside this directory (as apply_patch's root)."),
]


def _header(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "header",
        "required": False,
        "schema": {"type": "string"},
        "description": description,
    }


_GET_HEADERS = [_header("Range", "One byte range: bytes=START-END, bytes=START- or bytes=-N.")]
_PUT_HEADERS = [
    _header("If-Match", 'Write only over this content: "<sha256>" (the ETag of a GET).'),
    _header("X-Airlock-Mode", "Permission bits of a new file, octal (0644); 0-0777 only."),
]


def _agent_paths(defs: dict[str, Any], errors: dict[str, Any]) -> dict[str, Any]:
    """Watch and transfer: streamed bodies, so their schemas are described by media type."""
    binary = {"schema": {"type": "string", "format": "binary"}}
    with_412 = {
        **errors,
        "412": {"description": "If-Match no longer holds (stale_write)", **errors["409"]},
    }
    return {
        "/v1/watch": {
            "post": {
                "operationId": "watch",
                "summary": "File changes as they happen, one JSON object a line, until closed.",
                "requestBody": {
                    "required": False,
                    "content": {"application/json": {"schema": _schema(WatchInput, defs)}},
                },
                "responses": {
                    "200": {
                        "description": "created/modified/deleted/moved/overflow events (NDJSON)",
                        "content": {"application/x-ndjson": {"schema": _schema(WatchEvent, defs)}},
                    },
                    **errors,
                },
            }
        },
        "/v1/files": {
            "get": {
                "operationId": "files_get",
                "summary": "Stream a file (ETag is its sha256; one Range answers 206).",
                "parameters": [*_PATH_PARAMS, *_GET_HEADERS],
                "responses": {
                    "200": {
                        "description": "the file",
                        "content": {"application/octet-stream": binary},
                    },
                    "206": {
                        "description": "the range",
                        "content": {"application/octet-stream": binary},
                    },
                    "416": {"description": "range outside the file", **errors["400"]},
                    **errors,
                },
            },
            "put": {
                "operationId": "files_put",
                "summary": "Stream a body into a file, atomically (If-Match for compare-and-swap).",
                "parameters": [*_PATH_PARAMS, *_PUT_HEADERS],
                "requestBody": {"required": True, "content": {"application/octet-stream": binary}},
                "responses": {
                    "200": {
                        "description": "written",
                        "content": {
                            "application/json": {"schema": _schema(FileTransferOutput, defs)}
                        },
                    },
                    **with_412,
                },
            },
        },
        "/v1/archive": {
            "get": {
                "operationId": "archive_get",
                "summary": "A directory as a tar stream.",
                "parameters": _PATH_PARAMS,
                "responses": {
                    "200": {"description": "the tar", "content": {"application/x-tar": binary}},
                    **errors,
                },
            },
            "put": {
                "operationId": "archive_put",
                "summary": "Extract a tar into a directory, all or nothing.",
                "parameters": _PATH_PARAMS,
                "requestBody": {"required": True, "content": {"application/x-tar": binary}},
                "responses": {
                    "200": {
                        "description": "extracted",
                        "content": {
                            "application/json": {"schema": _schema(ArchivePutOutput, defs)}
                        },
                    },
                    **errors,
                },
            },
        },
    }
