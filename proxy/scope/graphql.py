"""GraphQL requests against a lease's ``graphql`` scope, parsed with graphql-core.

Every operation the request could run is judged: the one ``operationName``
selects, or every operation of the document when none is named (a server may
run any of them), and each element of a batch (a JSON array of requests).
Subscriptions are never allowed; a body that is not JSON (or repeats a key:
JSON readers disagree on which one wins), has no ``query``
string (persisted-query ids cannot be judged), does not parse, or holds
anything but executable definitions is refused. Never a regular expression:
``mutation`` inside a string or comment is not an operation, and an
anonymous ``{ ... }`` is a query.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from graphql import GraphQLError, parse
from graphql.language import (
    ExecutableDefinitionNode,
    OperationDefinitionNode,
)

__all__ = ["MAX_BODY", "GraphQLRefused", "Operation", "check_body", "operations_of"]

MAX_BODY = 1 << 20  # 1 MiB
# Parser bounds: a small body can still be a deep or token-heavy document.
_MAX_TOKENS = 50_000


class GraphQLRefused(ValueError):
    """The request is outside the scope (or cannot be judged); the text says why."""


@dataclass(frozen=True)
class Operation:
    kind: str  # query | mutation | subscription
    name: str | None


# Documents up to this size are cached (1,024 of them: at most 16 MiB of keys);
# a hostile sandbox cannot grow the cache with 1 MiB bodies.
_CACHED_QUERY_MAX = 16 * 1024


def _document_operations(query: str) -> tuple[Operation, ...]:
    """The operations a query document defines (cached when small: clients repeat
    their queries, and the parse allocates enough to cost the proxy garbage
    collections)."""
    if len(query) <= _CACHED_QUERY_MAX:
        return _cached_operations(query)
    return _parse_operations(query)


@functools.lru_cache(maxsize=1024)
def _cached_operations(query: str) -> tuple[Operation, ...]:
    return _parse_operations(query)


def _parse_operations(query: str) -> tuple[Operation, ...]:
    try:
        document = parse(query, no_location=True, max_tokens=_MAX_TOKENS)
    except (GraphQLError, RecursionError):
        raise GraphQLRefused("the GraphQL query does not parse") from None
    ops: list[Operation] = []
    for definition in document.definitions:
        if not isinstance(definition, ExecutableDefinitionNode):
            raise GraphQLRefused("the GraphQL document has non-executable definitions")
        if isinstance(definition, OperationDefinitionNode):
            name = definition.name.value if definition.name is not None else None
            ops.append(Operation(definition.operation.value, name))
    if not ops:
        raise GraphQLRefused("the GraphQL document has no operation")
    return tuple(ops)


def _ops_of_request(item: Any) -> list[Operation]:
    if not isinstance(item, dict):
        raise GraphQLRefused("each GraphQL request must be a JSON object")
    query = item.get("query")
    if not isinstance(query, str):
        raise GraphQLRefused("the GraphQL request has no 'query' string")
    selected = item.get("operationName")
    if selected is not None and not isinstance(selected, str):
        raise GraphQLRefused("'operationName' must be a string")
    ops = _document_operations(query)
    if selected:
        chosen = [op for op in ops if op.name == selected]
        if not chosen:
            raise GraphQLRefused(f"operation {selected!r} is not in the document")
        return chosen
    return list(ops)


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """JSON readers disagree on repeated keys (first or last wins): refuse them."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def operations_of(body: bytes) -> list[Operation]:
    """Every operation ``body`` could run (raises :class:`GraphQLRefused`)."""
    if len(body) > MAX_BODY:
        raise GraphQLRefused(f"the GraphQL body is over {MAX_BODY} bytes")
    try:
        data = json.loads(body, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        raise GraphQLRefused(f"the GraphQL body repeats the key {str(exc)[:64]!r}") from None
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise GraphQLRefused("the GraphQL body is not JSON") from None
    items = data if isinstance(data, list) else [data]
    if not items:
        raise GraphQLRefused("the GraphQL batch is empty")
    out: list[Operation] = []
    for item in items:
        out.extend(_ops_of_request(item))
    return out


def check_body(body: bytes, operations: Sequence[str], names: Sequence[str] | None) -> None:
    """Raise :class:`GraphQLRefused` unless every operation is allowed."""
    for op in operations_of(body):
        label = f"{op.kind} {op.name}" if op.name else f"anonymous {op.kind}"
        if op.kind == "subscription" or op.kind not in operations:
            raise GraphQLRefused(
                f"GraphQL {label} is not allowed (allowed: {', '.join(operations)})"
            )
        if names is not None and op.name not in names:
            raise GraphQLRefused(f"GraphQL {label} is not among the allowed operation names")
