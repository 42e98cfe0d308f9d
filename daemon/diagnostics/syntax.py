"""The ``syntax`` check: tree-sitter ERROR and MISSING nodes, exact parsers on top.

Runs inside the diagnostics worker process (see ``worker.py``), never in the
daemon: py-tree-sitter holds the GIL while it parses and ``ast.parse`` of a
1 MB file takes over a second, either of which would stall every other request.
Parsers are built once per language and kept by :class:`SyntaxChecker`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import tree_sitter

from . import precise
from .model import MAX_FINDINGS_PER_FILE, Finding, finding

CHECK = "syntax"

_GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "json": ("tree_sitter_json", "language"),
    "jsonc": ("tree_sitter_json", "language"),
    "yaml": ("tree_sitter_yaml", "language"),
    "toml": ("tree_sitter_toml", "language"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "bash": ("tree_sitter_bash", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "java": ("tree_sitter_java", "language"),
}

SUPPORTED_LANGUAGES = frozenset(_GRAMMARS)
_SNIPPET_CHARS = 40


class GrammarUnavailable(Exception):
    """The grammar wheel for a language is not installed (or has an incompatible ABI)."""


class SyntaxChecker:
    """Parses text per language with cached parsers; one instance per worker process."""

    def __init__(self) -> None:
        self._parsers: dict[str, tree_sitter.Parser] = {}

    def parser(self, language: str) -> tree_sitter.Parser:
        cached = self._parsers.get(language)
        if cached is not None:
            return cached
        module_name, attr = _GRAMMARS[language]
        try:
            module = importlib.import_module(module_name)
            capsule: Callable[[], Any] = getattr(module, attr)
            parser = tree_sitter.Parser(tree_sitter.Language(capsule()))
        except (ImportError, AttributeError, ValueError) as exc:
            raise GrammarUnavailable(
                f"the {module_name.replace('_', '-')} grammar is not usable ({exc}); "
                f"pip install {module_name.replace('_', '-')}"
            ) from exc
        self._parsers[language] = parser
        return parser

    def check(self, language: str, text: str, display: str) -> list[Finding]:
        """Every syntax problem in ``text`` (LF-normalised, BOM stripped)."""
        return self.check_tree(language, text, text.encode("utf-8"), display)[0]

    def check_tree(
        self, language: str, text: str, data: bytes, display: str
    ) -> tuple[list[Finding], tree_sitter.Tree]:
        """:meth:`check` and the fresh tree it parsed (``data`` is ``text`` in UTF-8)."""
        tree = self.parser(language).parse(data)
        found = _tree_findings(tree.root_node, data, display)
        if language in precise.POLICIES:
            return precise.combine(language, text, display, found), tree
        return found, tree

    def reparse(self, language: str, data: bytes, old_tree: tree_sitter.Tree) -> tree_sitter.Tree:
        """An incremental parse: ``old_tree`` must already describe the edits."""
        return self.parser(language).parse(data, old_tree)


def _error_nodes(root: tree_sitter.Node) -> list[tree_sitter.Node]:
    """Outermost ERROR nodes and MISSING nodes, in document order.

    Only subtrees flagged ``has_error`` are entered, so a clean 1 MB file costs
    one attribute read, and an ERROR's insides (cascades of the same mistake)
    are not reported again.
    """
    out: list[tree_sitter.Node] = []
    if not root.has_error:
        return out
    stack = [root]
    while stack and len(out) < MAX_FINDINGS_PER_FILE:
        node = stack.pop()
        if node.is_missing or node.is_error:
            out.append(node)
            continue
        if node.has_error:
            stack.extend(reversed(node.children))
    return out


def _tree_findings(root: tree_sitter.Node, data: bytes, display: str) -> list[Finding]:
    nodes = _error_nodes(root)
    if not nodes:
        return []
    lines = data.split(b"\n")
    out: list[Finding] = []
    for node in nodes:
        row, byte_col = node.start_point
        line_bytes = lines[row] if row < len(lines) else b""
        column = len(line_bytes[:byte_col].decode("utf-8", "replace")) + 1
        anchor = line_bytes.decode("utf-8", "replace")
        if node.is_missing:
            code, message = "missing", f'missing "{node.type}"'
        else:
            code, message = "syntax-error", _unexpected(node, data)
        out.append(
            finding(
                path=display,
                line=row + 1,
                column=column,
                severity="error",
                check=CHECK,
                code=code,
                message=message,
                anchor=anchor,
            )
        )
    return out


def _unexpected(node: tree_sitter.Node, data: bytes) -> str:
    raw = data[node.start_byte : node.end_byte].decode("utf-8", "replace").strip()
    first = raw.split("\n", 1)[0].strip()
    if len(first) > _SNIPPET_CHARS:
        first = first[:_SNIPPET_CHARS] + "…"
    parent = node.parent
    where = ""
    if parent is not None and parent.parent is not None:
        where = f" in {parent.type.replace('_', ' ')}"
    if not first:
        return f"syntax error{where}"
    return f'syntax error: unexpected "{first}"{where}'
