"""Which language a file is, by name: the one table syntax and types share."""

from __future__ import annotations

from pathlib import PurePath

_BY_SUFFIX: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".json": "json",
    ".jsonc": "jsonc",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".go": "go",
    ".rs": "rust",
    ".sh": "bash",
    ".bash": "bash",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
    ".java": "java",
}

_BY_NAME: dict[str, str] = {
    ".bashrc": "bash",
    ".bash_profile": "bash",
    ".profile": "bash",
    "Pipfile": "toml",
}

JSON_WITH_COMMENTS = frozenset(
    {
        "jsconfig.json",
        ".eslintrc.json",
        "devcontainer.json",
        ".devcontainer.json",
        "settings.json",
        "launch.json",
        "tasks.json",
        "extensions.json",
        "tslint.json",
        ".babelrc",
        "turbo.json",
    }
)
"""JSONC by convention (comments and trailing commas allowed), besides tsconfig*.json."""


def language_of(path: PurePath | str) -> str | None:
    """The tree-sitter language name for ``path``, or None when there is no grammar."""
    p = PurePath(path)
    if p.name in _BY_NAME:
        return _BY_NAME[p.name]
    if p.name in JSON_WITH_COMMENTS or (p.name.startswith("tsconfig") and p.suffix == ".json"):
        return "jsonc"
    return _BY_SUFFIX.get(p.suffix.lower())


def shebang_language(first_line: str) -> str | None:
    """Scripts without a suffix: ``#!/bin/bash`` and ``#!/usr/bin/env python3``."""
    if not first_line.startswith("#!"):
        return None
    words = first_line[2:].replace("/", " ").split()
    for word in reversed(words):
        if word in ("bash", "sh", "zsh"):
            return "bash"
        if word.startswith("python"):
            return "python"
        if word in ("node", "nodejs"):
            return "javascript"
    return None
