"""Every node of a JSON document, for tests that check a property of a whole schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def json_nodes(node: Any) -> Iterator[Any]:
    """``node`` and everything inside it, depth first (dict values and list items)."""
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        yield from json_nodes(child)
