"""OpenAPI 3.1 for the proxy's control API (``GET /v1/openapi.json``), from the protocol models.

Every route is listed with every status it can answer: each route behind the
token answers 401 without one; a route with an id in its path answers 400 for
an id that is not ``[A-Za-z0-9][A-Za-z0-9_.-]{0,127}``; a body route answers
400 for bad JSON or a failed validation and 413 over the 1 MiB body limit;
anything touching the store answers 503 when it is unreachable. The suite
fuzzes this document against the running API (tests/proxy/test_openapi_fuzz.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from .protocol import (
    MAX_EVENT_WAIT_S,
    ErrorBody,
    EventList,
    Health,
    LeaseInfo,
    LeaseList,
    LeasePut,
    SessionCreate,
    SessionInfo,
)

_REF_TEMPLATE = "#/components/schemas/{model}"
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"

_DESCRIPTIONS = {
    400: "invalid request: bad JSON, a failed validation or a malformed id",
    401: "missing or wrong bearer token",
    404: "no such session (or route)",
    405: "method not allowed on this route",
    409: "the session exists, or a placeholder belongs to another live lease",
    413: "the request body is over 1 MiB",
    424: "credential_unavailable: a provider-backed credential could not be minted",
    503: "the session store is unavailable",
}


def _schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    schema = TypeAdapter(tp).json_schema(ref_template=_REF_TEMPLATE)
    defs.update(schema.pop("$defs", {}))
    return schema


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def openapi_document(version: str) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    error = _schema(ErrorBody, defs)

    def errors(*statuses: int) -> dict[str, Any]:
        return {str(s): _json(_DESCRIPTIONS[s], error) for s in (401, *statuses)}

    def ids(*names: str) -> list[dict[str, Any]]:
        return [
            {
                "name": name,
                "in": "path",
                "required": True,
                "schema": {"type": "string", "pattern": ID_PATTERN},
            }
            for name in names
        ]

    def body(model: Any) -> dict[str, Any]:
        return {
            "required": True,
            "content": {"application/json": {"schema": _schema(model, defs)}},
        }

    events = _schema(EventList, defs)
    event_query: list[dict[str, Any]] = [
        {"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0}},
        {
            "name": "wait_s",
            "in": "query",
            "schema": {"type": "number", "minimum": 0, "maximum": MAX_EVENT_WAIT_S},
        },
    ]

    session_view = {
        "type": "object",
        "properties": {
            "session_id": {"type": "string"},
            "allow": {"type": "array", "items": {"type": "string"}},
            "expires_at": {"type": "string", "format": "date-time"},
        },
        "required": ["session_id", "allow", "expires_at"],
        "additionalProperties": False,
    }
    text = {"schema": {"type": "string"}}
    paths: dict[str, Any] = {
        "/v1/health": {
            "get": {
                "operationId": "health",
                "summary": "Liveness and the store's state (no token needed).",
                "security": [{}],
                "responses": {
                    "200": _json("up", _schema(Health, defs)),
                    "503": _json("the store is unreachable", _schema(Health, defs)),
                },
            }
        },
        "/v1/ca.pem": {
            "get": {
                "operationId": "ca_pem",
                "summary": "The proxy's CA certificate (PEM), for the sandbox's trust store.",
                "responses": {
                    "200": {"description": "PEM", "content": {"application/x-pem-file": text}},
                    **errors(),
                },
            }
        },
        "/metrics": {
            "get": {
                "operationId": "metrics",
                "summary": "Prometheus metrics.",
                "responses": {
                    "200": {"description": "Prometheus text", "content": {"text/plain": text}},
                    **errors(),
                },
            }
        },
        "/v1/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document.",
                "responses": {
                    "200": _json("OpenAPI 3.1", {"type": "object"}),
                    **errors(),
                },
            }
        },
        "/v1/sessions": {
            "post": {
                "operationId": "create_session",
                "requestBody": body(SessionCreate),
                "responses": {
                    "201": _json("created", _schema(SessionInfo, defs)),
                    **errors(400, 409, 413, 503),
                },
            }
        },
        "/v1/sessions/{sid}": {
            "parameters": ids("sid"),
            "get": {
                "operationId": "get_session",
                "responses": {"200": _json("the session", session_view), **errors(400, 404, 503)},
            },
            "delete": {
                "operationId": "delete_session",
                "summary": "Delete the session and its leases (idempotent).",
                "responses": {"204": {"description": "gone"}, **errors(400, 503)},
            },
        },
        "/v1/sessions/{sid}/leases": {
            "parameters": ids("sid"),
            "get": {
                "operationId": "list_leases",
                "responses": {
                    "200": _json("the session's live leases", _schema(LeaseList, defs)),
                    **errors(400, 404, 503),
                },
            },
        },
        "/v1/sessions/{sid}/leases/{lid}": {
            "parameters": ids("sid", "lid"),
            "put": {
                "operationId": "put_lease",
                "summary": "Install or replace a lease; its swaps are audited with this "
                "request's trace id.",
                "requestBody": body(LeasePut),
                "responses": {
                    "200": _json("installed", _schema(LeaseInfo, defs)),
                    **errors(400, 404, 409, 413, 424, 503),
                },
            },
            "delete": {
                "operationId": "delete_lease",
                "summary": "Remove a lease (idempotent).",
                "responses": {"204": {"description": "gone"}, **errors(400, 503)},
            },
        },
        "/v1/sessions/{sid}/events": {
            "parameters": [*ids("sid"), *event_query],
            "get": {
                "operationId": "session_events",
                "summary": "Long poll of one session's events after seq `after`.",
                "responses": {
                    "200": _json("events (possibly none) and the next cursor", events),
                    **errors(400, 503),
                },
            },
        },
        "/v1/events": {
            "parameters": event_query,
            "get": {
                "operationId": "all_events",
                "summary": "Long poll of every session's events after seq `after`.",
                "responses": {
                    "200": _json("events (possibly none) and the next cursor", events),
                    **errors(400, 503),
                },
            },
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "airlock-proxy control API", "version": version},
        "paths": paths,
        "components": {
            "schemas": defs,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }
